"""deepagents: ``create_deep_agent(..., interrupt_on=...)`` gated by signoff, subagents
included — the subagent's approval pauses the whole agent and resumes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from signoff.integrations.langchain import SignoffMiddleware, pending_request_ids, resume
from signoff.integrations.langchain.testing import ScriptedChatModel, tool_call
from tests.integrations.langchain.conftest import thread

pytest.importorskip("deepagents")

from signoff.integrations.langchain.deepagents import create_deep_agent


def parent(subagent: str) -> ScriptedChatModel:
    """The main agent's model; it also drives the general-purpose subagent (which uses it)."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"parent done: {last.content}")
        if isinstance(last, HumanMessage) and last.content == "delete old.log":
            delete = tool_call("delete_file", {"path": "old.log"}, "call_gp_del")
            return AIMessage("", tool_calls=[delete])
        task = {"description": "delete old.log", "subagent_type": subagent}
        return AIMessage("", tool_calls=[tool_call("task", task, "call_task")])

    return ScriptedChatModel(script=script)


def janitor() -> ScriptedChatModel:
    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(f"janitor finished: {messages[-1].content}")
        return AIMessage("", tool_calls=[tool_call("delete_file", {"path": "old.log"}, "call_del")])

    return ScriptedChatModel(script=script)


@pytest.fixture
def deleted() -> list[str]:
    return []


def build(deleted: list[str], subagent: str = "janitor", **kwargs: Any) -> Any:
    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    spec = {
        "name": "janitor",
        "description": "deletes files",
        "system_prompt": "You delete files.",
        "tools": [delete_file],
        "model": janitor(),
    }
    return create_deep_agent(
        parent(subagent), [delete_file], subagents=[spec], checkpointer=InMemorySaver(), **kwargs
    )


def test_subagent_call_pauses_the_parent_and_resumes_on_approve(deleted: list[str]) -> None:
    agent = build(
        deleted, interrupt_on={"delete_file": {"allowed_decisions": ["approve", "reject"]}}
    )
    cfg = thread()
    out = agent.invoke({"messages": [HumanMessage("clean up")]}, cfg, version="v2")
    (interrupt,) = out.interrupts
    assert interrupt.value["action_requests"][0]["tool_call_id"] == "call_del"
    assert deleted == []
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    assert deleted == ["old.log"]
    assert out.value["messages"][-1].content == ("parent done: janitor finished: deleted old.log")


def test_subagent_reject_and_resume_from_the_store(deleted: list[str]) -> None:
    guard = SignoffMiddleware({"delete_file": True})
    agent = build(deleted, signoff=guard)
    cfg = thread()
    agent.invoke({"messages": [HumanMessage("clean up")]}, cfg, version="v2")
    (request_id,) = pending_request_ids(agent, cfg)
    guard.gate.decide(request_id, [{"type": "reject", "message": "keep logs"}], approver="ops")
    out = agent.invoke(resume(agent, cfg), cfg, version="v2")
    assert deleted == []
    assert "User rejected the tool call for `delete_file` with reason: keep logs" in (
        out.value["messages"][-1].content
    )


def test_general_purpose_subagent_is_gated_too(deleted: list[str]) -> None:
    agent = build(deleted, subagent="general-purpose", interrupt_on={"delete_file": True})
    cfg = thread()
    out = agent.invoke({"messages": [HumanMessage("clean up")]}, cfg, version="v2")
    assert [i.value["tool_call_ids"] for i in out.interrupts] == [["call_gp_del"]]
    assert deleted == []
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    assert deleted == ["old.log"]


def test_an_approved_task_whose_subagent_pauses_runs_once(deleted: list[str]) -> None:
    agent = build(deleted, interrupt_on={"task": True, "delete_file": True})
    cfg = thread()
    out = agent.invoke({"messages": [HumanMessage("clean up")]}, cfg, version="v2")
    assert out.interrupts[0].value["tool_call_ids"] == ["call_task"]
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    out = agent.invoke(approve, cfg, version="v2")  # the task runs; its subagent pauses
    assert out.interrupts[0].value["tool_call_ids"] == ["call_del"]
    out = agent.invoke(approve, cfg, version="v2")  # the same task execution resumes
    assert deleted == ["old.log"]
    assert out.value["messages"][-1].content == "parent done: janitor finished: deleted old.log"


def writer(*paths: str) -> ScriptedChatModel:
    """Writes each path with deepagents' own write_file tool, then reports the results."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
            return AIMessage("written: " + " | ".join(results))
        calls = [
            tool_call("write_file", {"file_path": p, "content": "k"}, f"w{i}")
            for i, p in enumerate(paths)
        ]
        return AIMessage("", tool_calls=calls)

    return ScriptedChatModel(script=script)


def test_filesystem_interrupt_permissions_are_folded_into_signoff() -> None:
    """deepagents' ``mode="interrupt"`` rules become signoff interrupt_on entries (the same
    path predicates), deepagents adds no HumanInTheLoopMiddleware of its own, and rule order
    and every deny still hold."""
    from deepagents.middleware.filesystem import FilesystemPermission

    permissions = [
        FilesystemPermission(operations=["write"], paths=["/secrets/**"], mode="interrupt"),
        FilesystemPermission(operations=["write"], paths=["/etc/**"], mode="deny"),
    ]
    agent = create_deep_agent(
        writer("/secrets/key.txt", "/notes/a.txt", "/etc/passwd"),
        [],
        permissions=permissions,
        checkpointer=InMemorySaver(),
    )
    assert not [n for n in agent.nodes if "HumanInTheLoop" in n]
    cfg = thread()
    out = agent.invoke({"messages": [HumanMessage("write")]}, cfg, version="v2")
    (interrupt,) = out.interrupts
    assert interrupt.value["tool_call_ids"] == ["w0"]  # only the /secrets write asks
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg, version="v2")
    files = out.value["files"]
    assert set(files) == {"/secrets/key.txt", "/notes/a.txt"}
    results = {
        m.tool_call_id: str(m.content) for m in out.value["messages"] if isinstance(m, ToolMessage)
    }
    assert "permission denied" in results["w2"].lower()


def test_interrupt_permissions_with_a_policy_file_are_refused_with_the_fix() -> None:
    from deepagents.middleware.filesystem import FilesystemPermission

    from signoff import Gate, Policy
    from signoff.model import SignoffError
    from signoff.store import MemoryStore

    gate = Gate(Policy.from_yaml("version: 1\ndefaults: {unknown_tool: allow}\n"), MemoryStore())
    rule = FilesystemPermission(operations=["write"], paths=["/secrets/**"], mode="interrupt")
    with pytest.raises(SignoffError, match="interrupt_on= instead of signoff="):
        create_deep_agent(writer("/secrets/x"), [], signoff=gate, permissions=[rule])
    gate.close()


def shell_runner(*commands: str) -> ScriptedChatModel:
    """Runs each command with deepagents' own ``execute`` tool, then writes a file."""

    def script(messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage("finished")
        calls = [tool_call("execute", {"command": c}, f"x{i}") for i, c in enumerate(commands)]
        calls.append(tool_call("write_file", {"file_path": "/new.txt", "content": "k"}, "w"))
        return AIMessage("", tool_calls=calls)

    return ScriptedChatModel(script=script)


def test_a_non_interactive_run_with_the_preset_runs_only_allow_listed_commands(
    tmp_path: Any,
) -> None:
    """`signoff init --preset deepagents` + a non-interactive gate + deepagents' real local
    shell: `ls` runs, `rm` and the file write are refused at once with why, nothing pauses."""
    from deepagents.backends import LocalShellBackend

    from signoff import Gate, Policy
    from signoff.cli.main import Preset, preset_text
    from signoff.store import SQLiteStore

    (tmp_path / "keep.txt").write_text("precious")
    policy_path = tmp_path / "signoff.yaml"
    policy_path.write_text(preset_text(Preset.deepagents))
    gate = Gate(Policy.load(policy_path), SQLiteStore(tmp_path / "s.db"), interactive=False)
    try:
        agent = create_deep_agent(
            shell_runner("ls", "rm keep.txt"),
            [],
            signoff=gate,
            backend=LocalShellBackend(root_dir=tmp_path),
            checkpointer=InMemorySaver(),
        )
        out = agent.invoke({"messages": [HumanMessage("tidy up")]}, thread(), version="v2")
        assert out.interrupts == ()
        results = {
            m.tool_call_id: str(m.content)
            for m in out.value["messages"]
            if isinstance(m, ToolMessage)
        }
        assert "keep.txt" in results["x0"]  # `ls` ran in the real shell
        assert "part 1 (`rm keep.txt`) does not start with an allowed command" in results["x1"]
        assert "Allowed commands: ls, cat" in results["x1"]
        assert "no human is available" in results["w"]
        assert (tmp_path / "keep.txt").read_text() == "precious"
        assert not (tmp_path / "new.txt").exists()
    finally:
        gate.close()
