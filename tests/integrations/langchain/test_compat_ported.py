"""End to end, the behaviours LangChain's own ``test_human_in_the_loop.py`` checks white-box.

LangChain tests its middleware by calling ``after_model`` (or ``wrap_tool_call`` with its
private ``hitl_edited_tool_calls`` state) directly. ``SignoffMiddleware`` has no
``after_model`` node and keeps decisions in its store, so those tests are expected
differences (``tests/compat/langchain_expected_differences.txt``). Here each behaviour they
check runs through a real ``create_agent`` graph instead; every docstring names the
LangChain test it stands for. Behaviours our other tests already show are not repeated: the
differences file names those tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime
from langgraph.types import Command
from pydantic import AfterValidator

from signoff import DecisionError
from signoff.integrations.langchain import SignoffMiddleware
from signoff.integrations.langchain.testing import ScriptedChatModel
from tests.integrations.langchain.conftest import (
    Ran,
    go,
    make_agent,
    no_dangling_calls,
    thread,
    tool_call,
    tool_messages,
)

NOTICE = "Note: a human reviewer replaced this tool call before it ran."


def pause(middleware: SignoffMiddleware, tools: list[BaseTool], *calls: dict[str, Any]) -> Any:
    """An agent paused on ``calls``, and its thread config."""
    agent = make_agent(middleware, tools, *calls)
    cfg = thread()
    out = agent.invoke(go(), cfg, version="v2")
    assert len(out.interrupts) == 1
    return agent, cfg, out.interrupts[0].value


def decide(agent: Any, cfg: dict[str, Any], *decisions: dict[str, Any]) -> Any:
    return agent.invoke(Command(resume={"decisions": list(decisions)}), cfg, version="v2")


def edit(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


def still_paused(agent: Any, cfg: dict[str, Any]) -> bool:
    state = agent.get_state(cfg)
    return state.next == ("model",) and len(state.interrupts) == 1


# ---------------------------------------------------------------- decisions and their texts


@pytest.mark.parametrize(
    ("decision", "text"),
    [
        ({"type": "reject", "message": "not now"}, "with reason: not now"),
        ({"type": "reject"}, "with id c1. The tool was not executed."),
    ],
    ids=["with-reason", "default"],
)
def test_a_rejection_is_an_error_result_named_for_the_tool_and_call(
    tools: list[BaseTool], ran: Ran, decision: dict[str, Any], text: str
) -> None:
    """Ports ``..._single_tool_rejection_reason`` and ``..._default_rejection_message``."""
    middleware = SignoffMiddleware({"delete_file": {"allowed_decisions": ["approve", "reject"]}})
    agent, cfg, _ = pause(middleware, tools, tool_call("delete_file", {"path": "p"}, "c1"))
    out = decide(agent, cfg, decision)
    message = tool_messages(out.value["messages"])["c1"]
    assert (message.name, message.status) == ("delete_file", "error")
    assert text in str(message.content)
    assert ran.calls == []


def test_respond_when_not_allowed_is_refused_and_nothing_is_saved(
    tools: list[BaseTool], ran: Ran
) -> None:
    """Ports ``..._respond_disallowed``: a ValueError, and the pause can still be answered."""
    middleware = SignoffMiddleware({"ask_user": {"allowed_decisions": ["approve", "reject"]}})
    agent, cfg, _ = pause(middleware, tools, tool_call("ask_user", {"question": "?"}, "q1"))
    with pytest.raises(ValueError, match="'respond' is not allowed") as refused:
        decide(agent, cfg, {"type": "respond", "message": "blue"})
    assert isinstance(refused.value, DecisionError)
    assert refused.value.field == "decisions[0].type"
    assert still_paused(agent, cfg)
    decide(agent, cfg, {"type": "approve"})
    assert ran.names() == ["ask_user"]


def test_true_allows_respond_alongside_an_approval_in_the_same_step(
    tools: list[BaseTool], ran: Ran
) -> None:
    """Ports ``..._true_allows_respond`` and ``..._mixed_with_respond``."""
    middleware = SignoffMiddleware({"ask_user": True, "delete_file": True})
    agent, cfg, value = pause(
        middleware,
        tools,
        tool_call("ask_user", {"question": "colour?"}, "q1"),
        tool_call("delete_file", {"path": "p"}, "d1"),
    )
    assert value["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
        "respond",
    ]
    out = decide(agent, cfg, {"type": "respond", "message": "blue"}, {"type": "approve"})
    results = tool_messages(out.value["messages"])
    assert (results["q1"].content, results["q1"].status) == ("blue", "success")
    assert results["d1"].content == "deleted p"
    assert ran.calls == [("delete_file", {"path": "p"})]  # the answered question never ran


def test_each_edit_of_a_step_runs_its_own_arguments(tools: list[BaseTool], ran: Ran) -> None:
    """Ports ``..._multiple_tools_edit_responses`` and ``..._edit_with_modified_args``."""
    middleware = SignoffMiddleware({"delete_file": True, "transfer": True})
    agent, cfg, _ = pause(
        middleware,
        tools,
        tool_call("delete_file", {"path": "prod/a"}, "d1"),
        tool_call("transfer", {"amount": 500, "to": "mallory"}, "t1"),
    )
    out = decide(
        agent, cfg, edit("delete_file", path="scratch/a"), edit("transfer", amount=5, to="bob")
    )
    assert sorted(ran.calls, key=str) == [  # the tools node runs them in parallel
        ("delete_file", {"path": "scratch/a"}),
        ("transfer", {"amount": 5, "to": "bob"}),
    ]
    ai = next(m for m in out.value["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert [(c["id"], c["args"]) for c in ai.tool_calls] == [  # the model's own calls
        ("d1", {"path": "prod/a"}),
        ("t1", {"amount": 500, "to": "mallory"}),
    ]
    results = tool_messages(out.value["messages"])
    assert str(results["d1"].content).endswith("deleted scratch/a")
    assert str(results["t1"].content).endswith("sent 5 to bob")


# ---------------------------------------------------------------- the interrupt value


def test_description_prefix_and_review_config_in_the_interrupt(tools: list[BaseTool]) -> None:
    """Ports ``..._interrupt_request_structure``."""
    middleware = SignoffMiddleware(
        {"transfer": {"allowed_decisions": ["approve", "edit", "reject"]}},
        description_prefix="Custom prefix",
    )
    _, _, value = pause(middleware, tools, tool_call("transfer", {"amount": 3, "to": "SF"}, "t1"))
    (action,) = value["action_requests"]
    assert (action["name"], action["args"]) == ("transfer", {"amount": 3, "to": "SF"})
    assert action["description"] == (
        "Custom prefix\n\nTool: transfer\nArgs: {'amount': 3, 'to': 'SF'}"
    )
    (review,) = value["review_configs"]
    assert review["action_name"] == "transfer"
    assert review["allowed_decisions"] == ["approve", "edit", "reject"]


def test_true_pauses_and_false_runs_without_asking(tools: list[BaseTool], ran: Ran) -> None:
    """Ports ``..._boolean_configs``."""
    gated = SignoffMiddleware({"delete_file": True})
    agent, cfg, value = pause(gated, tools, tool_call("delete_file", {"path": "p"}, "d1"))
    assert value["tool_call_ids"] == ["d1"] and ran.calls == []
    decide(agent, cfg, {"type": "approve"})

    ungated = SignoffMiddleware({"delete_file": False})
    agent = make_agent(ungated, tools, tool_call("delete_file", {"path": "q"}, "d2"))
    out = agent.invoke(go(), thread(), version="v2")
    assert out.interrupts == ()
    assert ran.calls == [("delete_file", {"path": "p"}), ("delete_file", {"path": "q"})]


@pytest.mark.parametrize(
    ("count", "says"), [(0, "no decisions given"), (2, "number of decisions (2)")]
)
def test_a_wrong_number_of_decisions_is_refused_and_nothing_is_saved(
    tools: list[BaseTool], ran: Ran, count: int, says: str
) -> None:
    """Ports ``..._sequence_mismatch`` (too few and too many decisions for one call)."""
    middleware = SignoffMiddleware({"delete_file": True})
    agent, cfg, _ = pause(middleware, tools, tool_call("delete_file", {"path": "p"}, "d1"))
    with pytest.raises(ValueError, match=re.escape(says)) as refused:
        decide(agent, cfg, *[{"type": "approve"}] * count)
    assert isinstance(refused.value, DecisionError) and refused.value.field == "decisions"
    assert still_paused(agent, cfg) and ran.calls == []
    decide(agent, cfg, {"type": "approve"})
    assert ran.calls == [("delete_file", {"path": "p"})]


# ---------------------------------------------------------------- order of parallel calls


@pytest.fixture
def letters() -> tuple[list[BaseTool], list[tuple[str, int]]]:
    """Five tools ``a``..``e``, each recording its ``val``."""
    ran: list[tuple[str, int]] = []

    def letter(name: str) -> BaseTool:
        def run(val: int) -> str:
            ran.append((name, val))
            return f"{name}={val}"

        return tool(name, description=f"Tool {name}.")(run)

    return [letter(n) for n in "abcde"], ran


@pytest.mark.parametrize(
    ("decision_b", "ran_b"),
    [
        ({"type": "approve"}, [("b", 2)]),
        (edit("b", val=200), [("b", 200)]),
        ({"type": "reject", "message": "not b"}, []),
    ],
    ids=["approve", "edit", "reject"],
)
def test_interleaved_gated_calls_keep_the_models_order(
    letters: tuple[list[BaseTool], list[tuple[str, int]]],
    decision_b: dict[str, Any],
    ran_b: list[tuple[str, int]],
) -> None:
    """Ports ``..._preserves_tool_call_order``, ``..._with_edits`` and ``..._with_rejections``:
    a → b (gated) → c → d (gated) → e stays in that order in the model's message, each call
    gets exactly one result, and b's decision is applied to b only."""
    tools, ran = letters
    calls = [tool_call(n, {"val": v}, f"id_{n}") for v, n in enumerate("abcde", start=1)]
    agent, cfg, value = pause(SignoffMiddleware({"b": True, "d": True}), tools, *calls)
    assert value["tool_call_ids"] == ["id_b", "id_d"]
    out = decide(agent, cfg, decision_b, {"type": "approve"})
    ai = next(m for m in out.value["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert [(c["name"], c["id"], c["args"]) for c in ai.tool_calls] == [
        (n, f"id_{n}", {"val": v}) for v, n in enumerate("abcde", start=1)
    ]
    assert no_dangling_calls(out.value["messages"])
    assert sorted(ran) == sorted([("a", 1), ("c", 3), ("d", 4), ("e", 5), *ran_b])


# ---------------------------------------------------------------- the `when` predicate


def test_when_gets_a_tool_call_request_for_the_call(tools: list[BaseTool]) -> None:
    """Ports ``test_when_predicate_receives_correct_args`` (signoff also hands over the tool)."""
    seen: list[ToolCallRequest] = []

    def when(request: ToolCallRequest) -> bool:
        seen.append(request)
        return True

    middleware = SignoffMiddleware({"transfer": {"allowed_decisions": ["approve"], "when": when}})
    pause(middleware, tools, tool_call("transfer", {"amount": 42, "to": "x"}, "tc-1"))
    (request,) = seen
    assert isinstance(request, ToolCallRequest)
    assert request.tool_call["name"] == "transfer"
    assert request.tool_call["args"] == {"amount": 42, "to": "x"}
    assert request.tool is not None and request.tool.name == "transfer"
    assert isinstance(request.runtime, ToolRuntime)
    assert request.runtime.tool_call_id == "tc-1"
    assert [t.name for t in request.runtime.tools] == [t.name for t in tools]


def test_when_and_description_see_the_models_message_in_the_state(tools: list[BaseTool]) -> None:
    """As LangChain's ``after_model`` does: the state they get ends with the model's message."""
    last: list[BaseMessage] = []

    def when(request: ToolCallRequest) -> bool:
        last.append(request.state["messages"][-1])
        return True

    def describe(call: Any, state: Any, runtime: Any) -> str:
        last.append(state["messages"][-1])
        return "check it"

    config = {"allowed_decisions": ["approve"], "when": when, "description": describe}
    pause(
        SignoffMiddleware({"transfer": config}),
        tools,
        tool_call("transfer", {"amount": 1, "to": "x"}, "t1"),
    )
    assert len(last) == 2
    assert all(isinstance(m, AIMessage) and m.tool_calls[0]["id"] == "t1" for m in last)


# ---------------------------------------------------------------- the edit notice


@tool
def write_blocks(text: str) -> list[dict[str, Any]]:
    """Write text; answers in content blocks."""
    return [
        {"type": "text", "text": f"wrote {text}"},
        {"type": "image_url", "image_url": {"url": "u"}},
    ]


@tool
def write_command(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Write text; answers with a Command that updates the messages."""
    message = ToolMessage(content=f"wrote {text}", tool_call_id=tool_call_id, name="write_command")
    return Command(update={"messages": [message]})


def edited_result(tool_: BaseTool, **mw: Any) -> ToolMessage:
    """The result of ``tool_`` after a reviewer edited its ``text`` from "mine" to "theirs"."""
    middleware = SignoffMiddleware({tool_.name: True}, **mw)
    agent, cfg, _ = pause(middleware, [tool_], tool_call(tool_.name, {"text": "mine"}, "w1"))
    out = decide(agent, cfg, edit(tool_.name, text="theirs"))
    return tool_messages(out.value["messages"])["w1"]


def test_edit_notice_heads_block_content_as_a_text_block() -> None:
    """Ports ``..._edit_annotates_list_content``: the blocks stay, the notice comes first."""
    content: Any = edited_result(write_blocks).content
    assert isinstance(content, list)
    notice, *rest = content
    assert notice["type"] == "text" and notice["text"].startswith(NOTICE)
    assert notice["text"].endswith(
        'Executed instead: write_blocks with arguments {"text": "theirs"}.\n\nTool response:'
    )
    assert rest == [
        {"type": "text", "text": "wrote theirs"},
        {"type": "image_url", "image_url": {"url": "u"}},
    ]


def test_edit_notice_annotates_a_command_result() -> None:
    """Ports ``..._edit_annotates_command_result``."""
    content = str(edited_result(write_command).content)
    assert content.startswith(NOTICE)
    assert content.endswith("Tool response:\nwrote theirs")


@pytest.mark.parametrize("tool_", [write_blocks, write_command], ids=["blocks", "command"])
def test_edit_notice_can_be_replaced_or_turned_off(tool_: BaseTool) -> None:
    """Ports ``..._edit_notice_is_customizable`` and ``..._edit_notice_can_be_disabled``."""
    custom: Any = edited_result(tool_, edit_notice="Operator overrode these args.").content
    first = custom[0]["text"] if isinstance(custom, list) else custom
    assert first.startswith("Operator overrode these args. Executed instead:")
    assert NOTICE not in str(custom)
    plain = edited_result(tool_, edit_notice=None).content
    assert NOTICE not in str(plain) and "Executed instead" not in str(plain)
    assert "wrote theirs" in str(plain)


async def test_edit_notice_with_ainvoke(tools: list[BaseTool], ran: Ran) -> None:
    """Ports ``..._edit_annotates_async``."""
    agent = make_agent(
        SignoffMiddleware({"delete_file": True}),
        tools,
        tool_call("delete_file", {"path": "a"}, "d1"),
    )
    cfg = thread()
    await agent.ainvoke(go(), cfg, version="v2")
    resume: Command[Any] = Command(resume={"decisions": [edit("delete_file", path="b")]})
    out = await agent.ainvoke(resume, cfg, version="v2")
    content = str(tool_messages(out.value["messages"])["d1"].content)
    assert content.startswith(NOTICE) and content.endswith("Tool response:\ndeleted b")
    assert ran.calls == [("delete_file", {"path": "b"})]


def test_an_edit_naming_a_tool_the_agent_lacks_is_refused(tools: list[BaseTool], ran: Ran) -> None:
    """Ports ``..._edit_to_unknown_tool_raises``: a ValueError naming the field, before
    anything is saved."""
    middleware = SignoffMiddleware({"delete_file": True})
    agent, cfg, _ = pause(middleware, tools, tool_call("delete_file", {"path": "p"}, "d1"))
    with pytest.raises(ValueError, match="cannot switch tools") as refused:
        decide(agent, cfg, edit("nope", path="p"))
    assert isinstance(refused.value, DecisionError)
    assert refused.value.field == "decisions[0].edited_action.name"
    assert still_paused(agent, cfg) and ran.calls == []


# ---------------------------------------------------------------- edits across turns


def two_turns(first: dict[str, Any], second: dict[str, Any]) -> ScriptedChatModel:
    """Calls ``first`` on the first user message, ``second`` on the next, then summarizes."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=f"done: {messages[-1].content}")
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        return AIMessage(content="", tool_calls=[first if turn == 1 else second])

    return ScriptedChatModel(script=script)


def test_a_previous_turns_edit_never_applies_to_a_later_call(
    tools: list[BaseTool], ran: Ran
) -> None:
    """Ports ``test_a_turn_that_resolves_no_decisions_clears_the_previous_turns_edits`` (and
    its async twin): a later turn's call runs its own arguments, though the model reused the
    edited call's id."""
    model = two_turns(
        tool_call("delete_file", {"path": "prod/x"}, "c1"),
        tool_call("read_file", {"path": "notes"}, "c1"),
    )
    middleware = SignoffMiddleware({"delete_file": True})
    agent: Any = create_agent(
        model, tools=tools, middleware=[middleware], checkpointer=InMemorySaver()
    )
    cfg = thread()
    agent.invoke(go(), cfg, version="v2")
    decide(agent, cfg, edit("delete_file", path="scratch/x"))
    out = agent.invoke({"messages": [HumanMessage("now read")]}, cfg, version="v2")
    assert out.interrupts == ()
    assert ran.calls == [("delete_file", {"path": "scratch/x"}), ("read_file", {"path": "notes"})]
    assert out.value["messages"][-1].content == "done: contents of notes"


# ---------------------------------------------------------------- per_call behaviours, batched


def bracket(value: str) -> str:
    """A pydantic validator the tool applies to its own argument."""
    return f"<{value}>"


def test_an_edit_is_validated_once_by_the_tool_and_keeps_injected_arguments() -> None:
    """Ports ``test_per_call_edit_leaves_validation_and_injected_args_to_the_tool``: the
    interrupt shows only what the model fills in, and the tool's own validator and its
    injected runtime apply to the edited call once."""

    @tool
    def send_email(to: Annotated[str, AfterValidator(bracket)], runtime: ToolRuntime) -> str:
        """Send an email."""
        return f"sent to {to} for {runtime.tool_call_id}"

    middleware = SignoffMiddleware({"send_email": True})
    agent, cfg, value = pause(middleware, [send_email], tool_call("send_email", {"to": "a"}, "e1"))
    assert list(value["review_configs"][0]["args_schema"]["properties"]) == ["to"]
    out = decide(agent, cfg, edit("send_email", to="bob"))
    assert str(tool_messages(out.value["messages"])["e1"].content).endswith("sent to <bob> for e1")


@pytest.mark.parametrize(
    ("model_args", "edited_args"),
    [({"to": "alice", "cc": "carol"}, {"to": "bob"}), ({"to": "alice"}, {"to": "bob", "x": 1})],
    ids=["unlisted-args-are-dropped", "undeclared-args-are-ignored-by-the-tool"],
)
def test_an_edit_replaces_the_arguments(
    model_args: dict[str, Any], edited_args: dict[str, Any]
) -> None:
    """Ports the edit cases of ``test_per_call_resume_with_each_decision`` and
    ``test_per_call_pauses_once_per_gated_call_and_applies_answers_by_id``: the reviewer's
    arguments replace the model's (nothing is carried over), and the tool ignores an argument
    it does not declare, as it would from the model."""
    sent: list[tuple[str, str | None]] = []

    @tool
    def send_email(to: str, cc: str | None = None) -> str:
        """Send an email."""
        sent.append((to, cc))
        return f"sent to {to}"

    middleware = SignoffMiddleware({"send_email": True})
    agent, cfg, _ = pause(middleware, [send_email], tool_call("send_email", model_args, "e1"))
    out = decide(agent, cfg, edit("send_email", **edited_args))
    assert sent == [("bob", None)]
    content = str(tool_messages(out.value["messages"])["e1"].content)
    assert f"Executed instead: send_email with arguments {json.dumps(edited_args)}." in content
