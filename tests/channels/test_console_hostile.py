"""The console channel's interactive prompt against a hostile agent, on a real
pseudo-terminal: escape codes, bidi overrides, zero-width characters and line breaks in the
tool's arguments, the description, the agent's name, the user's request and the reasoning
reach the terminal only as visible stand-ins, on every line the prompt writes (the request,
the detail, the grant sentence, the edit prompt, the withdrawal note); very long values are
cut."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from signoff import Gate
from tests.channels.test_console_interactive import Pty, console_gate, pending_id

HOSTILE = "[bold]OK[/] \x1b[2J\x1b]8;;http://evil\x07link\u202eevil\u200b\nnext"
SHOWN = "[bold]OK[/] ␛[2J␛]8;;http://evil␇link<U+202E>evil<U+200B>⏎next"
#: The same text inside the arguments' JSON: controls are JSON escapes there.
IN_JSON = "[bold]OK[/] \\u001b[2J\\u001b]8;;http://evil\\u0007link<U+202E>evil<U+200B>\\nnext"
RAW = ("\x1b", "\x07", "\u202e", "\u200b")


class Recording(Pty):
    """A pty that also keeps everything the prompt wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.everything = ""

    def expect(self, text: str) -> str:
        shown = super().expect(text)
        self.everything += shown
        return shown


@pytest.fixture
def term() -> Iterator[Recording]:
    t = Recording()
    yield t
    t.close()


@pytest.fixture
def gate(tmp_path: Any, term: Recording) -> Iterator[Gate]:
    with console_gate(tmp_path, term) as g:
        yield g


def hostile_call(gate: Gate, **args: Any) -> Callable[[], Any]:
    """``deploy`` called by a hostile agent in a thread (it blocks); returns a join."""
    results: list[Any] = []
    guarded = gate.guard(lambda **kw: f"ran {kw}", name="deploy", on_reject="return")

    def agent() -> None:
        context = {"user_request": HOSTILE, "reasoning": HOSTILE}
        with gate.context(principal="erin", agent=HOSTILE, thread="t-1", **context):
            results.append(guarded(**args))

    thread = threading.Thread(target=agent)
    thread.start()

    def join() -> Any:
        thread.join()
        return results[0]

    return join


def inert_everywhere(term: Recording) -> None:
    for char in RAW:
        assert char not in term.everything, f"{char!r} reached the terminal"
    lines = term.everything.splitlines()
    assert not [line for line in lines if line.startswith("next")]  # no line break forged


def test_the_request_and_its_detail_are_inert(gate: Gate, term: Recording) -> None:
    join = hostile_call(gate, env=HOSTILE)
    shown = term.expect("your answer: ")
    assert f'deploy(env="{IN_JSON}") — Deploy {SHOWN}' in shown  # what will run, and why
    assert f"agent {SHOWN} · for erin" in shown
    term.type("o")
    shown = term.expect("your answer: ")
    assert f"user asked: {SHOWN}" in shown and f"agent's reasoning: {SHOWN}" in shown
    term.type("y")
    term.expect("Approved by erin")
    assert join() == f"ran {{'env': {HOSTILE!r}}}"  # what ran is exactly what was asked
    inert_everywhere(term)


def test_the_grant_sentence_is_inert(gate: Gate, term: Recording) -> None:
    join = hostile_call(gate, env="prod")
    term.expect("your answer: ")
    term.type("a")
    shown = term.expect("confirm? [y/N]: ")
    assert f"from {SHOWN} for erin on thread t-1" in shown
    term.type("n")
    term.expect("not granted")
    term.expect("your answer: ")
    term.type("y")
    join()
    inert_everywhere(term)


def test_the_edit_prompt_shows_hidden_characters_as_json_escapes(
    gate: Gate, term: Recording
) -> None:
    join = hostile_call(gate, env="prod\u202e\u200b")
    term.expect("your answer: ")
    term.type("e")
    term.expect('env ["prod\\u202e\\u200b"]: ')
    term.type("")  # kept as it is
    assert join() == "ran {'env': 'prod\\u202e\\u200b'}"
    inert_everywhere(term)


def test_the_withdrawal_note_is_inert(gate: Gate, term: Recording) -> None:
    join = hostile_call(gate, env="prod")
    term.expect("your answer: ")
    gate.decide(pending_id(gate), [{"type": "reject", "message": HOSTILE}], approver="bob")
    term.expect(f"withdrawn: ❌ Rejected by bob: {SHOWN}")
    assert HOSTILE in join()  # the agent gets the reviewer's message as written
    inert_everywhere(term)


def test_a_very_long_argument_is_cut(gate: Gate, term: Recording) -> None:
    join = hostile_call(gate, env="W" * 100_000)
    shown = term.expect("your answer: ")
    call_line = next(line for line in shown.splitlines() if "deploy(env=" in line)
    assert len(call_line) < 400 and "…" in call_line
    term.type("n")
    term.expect("reason (the agent sees it): ")
    term.type("too long")
    assert "too long" in join()


def test_secret_arguments_are_masked_at_the_prompt(gate: Gate, term: Recording) -> None:
    join = hostile_call(gate, env="prod", api_key="sk-live-123")
    shown = term.expect("your answer: ")
    assert 'deploy(env="prod", api_key=••••••)' in shown
    term.type("o")
    term.expect("your answer: ")
    term.type("y")
    assert "sk-live-123" in join()  # the tool still gets the real value
    assert "sk-live-123" not in term.everything
