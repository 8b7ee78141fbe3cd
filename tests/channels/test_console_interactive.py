"""The console channel's interactive prompt on a real pseudo-terminal, with ``@gate.guard``
blocking in an agent thread: the principal answers where the rule lets them, a decision
made elsewhere withdraws the prompt, parallel calls queue, no TTY turns it off."""

from __future__ import annotations

import io
import logging
import os
import pty
import select
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from signoff import Gate, Policy
from signoff.channels.config import ConsoleConfig
from signoff.channels.console import ConsoleChannel
from signoff.channels.console_prompt import Terminal
from signoff.store import SQLiteStore

POLICY = """
version: 1
people:
  erin: {roles: [dev]}
  bob:  {roles: [finance]}
tools:
  deploy:
    description: "Deploy {args.env}"
    default: require_approval
    approvers: {users: [erin, bob]}
    forbid_self_approval: false
    allowed_decisions: [approve, edit, reject]
    editable_args: [env]
  transfer:
    default: require_approval
    approvers: {roles: [finance]}
"""

#: A guard against a hang, not a measurement: reading stops once the text is there.
GIVE_UP_S = 60


class Pty:
    """The agent's terminal: the prompt writes to the slave; the test types on the master."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self.seen = ""

    def expect(self, text: str) -> str:
        while text not in self.seen:
            ready, _, _ = select.select([self.master], [], [], GIVE_UP_S)
            if not ready:
                raise AssertionError(f"never shown: {text!r}; terminal so far: {self.seen!r}")
            self.seen += os.read(self.master, 4096).decode("utf-8", "replace")
        before, _, self.seen = self.seen.partition(text)
        return before + text

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> None:
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def term() -> Iterator[Pty]:
    t = Pty()
    yield t
    t.close()


def console_gate(tmp_path: Any, term: Pty, **gate_options: Any) -> Gate:
    """A gate on a SQLite file whose console channel asks on ``term`` (a real pty)."""
    channel = ConsoleChannel(
        ConsoleConfig(interactive=True),
        stream=io.StringIO(),
        terminal=lambda: Terminal(term.slave, term.slave),
    )
    policy = Policy.from_yaml(textwrap.dedent(POLICY))
    store = SQLiteStore(tmp_path / "signoff.db")
    return Gate(policy, store, channels=[channel], **gate_options)


@pytest.fixture
def gate(tmp_path: Any, term: Pty) -> Iterator[Gate]:
    with console_gate(tmp_path, term, interactive=True) as g:
        yield g


def in_agent_thread(
    gate: Gate, tool: str, principal: str = "erin", **args: Any
) -> Callable[[], Any]:
    """Call a guarded tool in a thread (it blocks like an agent); returns a join."""
    results: list[Any] = []

    def run(**kwargs: Any) -> str:
        return f"ran {tool} {kwargs}"

    guarded = gate.guard(run, name=tool, on_reject="return")

    def agent() -> None:
        with gate.context(principal=principal, agent="dev-bot", thread="t-1"):
            results.append(guarded(**args))

    thread = threading.Thread(target=agent)
    thread.start()

    def join() -> Any:
        thread.join()
        return results[0]

    return join


def pending_id(gate: Gate) -> str:
    return str(gate.run_sync(gate.alist(status="pending"))[0].id)


def test_the_principal_approves_at_their_own_terminal(gate: Gate, term: Pty) -> None:
    join = in_agent_thread(gate, "deploy", env="prod")
    shown = term.expect("your answer: ")
    assert "Deploy prod" in shown and "[y/1] approve" in shown and "[n/2] reject" in shown
    assert "[a/3]" in shown  # approve and grant, confirmed after its exact scope is shown
    term.type("y")
    assert join() == "ran deploy {'env': 'prod'}"
    term.expect("✅ Approved by erin")  # the outcome line, on the same terminal
    decided = gate.run_sync(gate.alist(status="resolved"))[0]
    assert decided.decisions[0].approver == "erin" and decided.decisions[0].channel == "console"


def test_a_grant_shows_its_exact_scope_and_needs_a_confirmation(gate: Gate, term: Pty) -> None:
    join = in_agent_thread(gate, "deploy", env="prod")
    term.expect("your answer: ")
    term.type("a")
    shown = term.expect("confirm? [y/N]: ")
    assert "this also approves: " in shown and "deploy" in shown and "t-1" in shown
    term.type("")  # not confirmed: nothing granted, asked again
    term.expect("not granted")
    term.expect("your answer: ")
    term.type("3")
    term.expect("confirm? [y/N]: ")
    term.type("y")
    assert join() == "ran deploy {'env': 'prod'}"
    assert len(gate.list_grants()) == 1
    # the next deploy on the same thread needs nobody
    assert in_agent_thread(gate, "deploy", env="staging")() == "ran deploy {'env': 'staging'}"


def test_reject_asks_for_the_reason(gate: Gate, term: Pty) -> None:
    join = in_agent_thread(gate, "deploy", env="prod")
    term.expect("your answer: ")
    term.type("2")
    term.expect("reason (the agent sees it): ")
    term.type("")  # empty: refused, asked again
    term.expect("a rejection needs a reason")
    term.expect("your answer: ")
    term.type("n")
    term.expect("reason (the agent sees it): ")
    term.type("not on a friday")
    assert "not on a friday" in join()


def test_edit_prompts_each_editable_argument(gate: Gate, term: Pty) -> None:
    join = in_agent_thread(gate, "deploy", env="prod")
    term.expect("your answer: ")
    term.type("e")
    term.expect('env ["prod"]: ')
    term.type("staging")
    assert join() == "ran deploy {'env': 'staging'}"


def test_an_unknown_key_is_named_and_asked_again(gate: Gate, term: Pty) -> None:
    join = in_agent_thread(gate, "deploy", env="prod")
    term.expect("your answer: ")
    term.type("x")
    term.expect("not a choice: 'x'")
    term.expect("your answer: ")
    term.type("1")
    assert join().startswith("ran deploy")


def test_a_decision_elsewhere_withdraws_the_prompt(gate: Gate, term: Pty) -> None:
    join = in_agent_thread(gate, "deploy", env="prod")
    term.expect("your answer: ")
    gate.decide(pending_id(gate), [{"type": "reject", "message": "no"}], approver="bob")
    term.expect("withdrawn: ❌ Rejected by bob: no")
    assert "no" in join()


def test_where_the_principal_may_not_decide_it_only_says_who_it_waits_for(
    gate: Gate, term: Pty
) -> None:
    join = in_agent_thread(gate, "transfer", amount=5)
    shown = term.expect("deadline ")
    assert "waiting for role finance (0 of 1)…" in shown and "your answer" not in shown
    gate.decide(pending_id(gate), [{"type": "approve"}], approver="bob")
    assert join().startswith("ran transfer")


def test_parallel_calls_queue(gate: Gate, term: Pty) -> None:
    first = in_agent_thread(gate, "deploy", env="one")
    term.expect("your answer: ")
    second = in_agent_thread(gate, "deploy", env="two")
    term.type("y")
    assert first() == "ran deploy {'env': 'one'}"
    shown = term.expect("your answer: ")
    assert "Deploy two" in shown
    term.type("y")
    assert second() == "ran deploy {'env': 'two'}"


def test_agent_text_is_inert_on_the_terminal(gate: Gate, term: Pty) -> None:
    join = in_agent_thread(gate, "deploy", env="\x1b[2J\u202eprod[bold]")
    shown = term.expect("your answer: ")
    assert "␛[2J<U+202E>prod[bold]" in shown and "\x1b[2J" not in shown
    term.type("n")
    term.expect("reason (the agent sees it): ")
    term.type("odd")
    join()


def test_without_a_tty_the_prompt_turns_itself_off(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="signoff.channels.console"):
        channel = ConsoleChannel(ConsoleConfig(interactive=True), terminal=lambda: None)
    assert channel.prompt is None
    assert [r.getMessage() for r in caplog.records] == [
        "console channel: not a terminal, the interactive prompt is off"
    ]


def test_a_pipe_is_not_a_terminal() -> None:
    read, write = os.pipe()
    try:
        assert not Terminal(read, write).is_tty()
    finally:
        os.close(read)
        os.close(write)


def test_interactive_is_a_channel_setting() -> None:
    from signoff.channels.config import parse
    from signoff.model import PolicyError

    assert parse({"console": {"interactive": True}}).console == ConsoleConfig(interactive=True)
    with pytest.raises(PolicyError, match="interactive"):
        parse({"console": {"interactive": "sometimes"}})


# ---------------------------------------------------------------------- signoff mcp-proxy
INTERACTIVE_POLICY = POLICY + "channels: {console: {interactive: true}}\n"


def test_mcp_commands_turn_the_prompt_off_by_default(caplog: pytest.LogCaptureFixture) -> None:
    from signoff.channels.console import for_mcp

    policy = Policy.from_yaml(textwrap.dedent(INTERACTIVE_POLICY))
    with caplog.at_level(logging.WARNING, logger="signoff.channels.console"):
        [channel] = for_mcp(policy, prompt_tty=False)
    assert channel.prompt is None and caplog.records == []  # off, not "not a terminal"
    assert for_mcp(Policy.from_yaml(textwrap.dedent(POLICY)), prompt_tty=False) == []
