"""``SignoffMiddleware``: LangChain's ``HumanInTheLoopMiddleware``, backed by a signoff gate.

Switching is a one-line change — the same ``interrupt_on`` mapping, the same interrupt
value and ``Command(resume={"decisions": [...]})`` — and a signoff ``Gate`` or policy file
adds conditions, approver roles, quorum, deadlines, channels and a durable, audited store.

The middleware works entirely inside ``wrap_model_call`` and ``wrap_tool_call``, so it adds
no node to the graph. It subclasses ``HumanInTheLoopMiddleware`` (so ``isinstance`` checks
and the ``interrupt_on`` / ``description_prefix`` / ``edit_notice`` / ``interrupt_mode``
attributes work as with LangChain's) but does not inherit its ``after_model`` hooks, which
would add a node. Put it **last** in ``create_agent(middleware=[...])``: it must see
each tool call after every other middleware changed it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain.agents.middleware.human_in_the_loop import (
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
)
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.types import Command

from signoff.gate import Gate
from signoff.integrations.langchain import _hooks
from signoff.integrations.langchain._effects import adrive, drive
from signoff.integrations.langchain._messages import DEFAULT_EDIT_NOTICE
from signoff.integrations.langchain._model_step import ModelResult, SetupError, model_flow
from signoff.integrations.langchain._review import PrincipalSetting, StepReviewer
from signoff.integrations.langchain._settings import Settings, WaitMode
from signoff.integrations.langchain._tool_call import tool_flow
from signoff.model import DECISION_TYPES, SignoffError
from signoff.policy import Policy
from signoff.store import Store

InterruptOn = Mapping[str, Any]
ToolResult = ToolMessage | Command[Any]


class SignoffMiddleware(HumanInTheLoopMiddleware[AgentState[Any], Any, Any]):
    """Human sign-off for the tool calls of a ``create_agent`` agent.

    ``SignoffMiddleware(interrupt_on)`` takes LangChain's mapping (``True``, ``False`` or
    ``{"allowed_decisions", "description", "when"}``) and keeps requests in memory;
    ``SignoffMiddleware(gate)`` or ``SignoffMiddleware("signoff.yaml")`` uses a signoff
    gate or policy file (durable store, roles, quorum, deadlines, channels).

    ``mode="interrupt"`` (default) pauses the graph with LangGraph's ``interrupt()`` and
    needs a checkpointer; ``mode="blocking"`` waits for the decision inside the tool call.
    A decision sent with ``Command(resume=...)`` is made by ``approver`` (default: the
    principal the agent acts for).

    Like LangChain's, it exposes ``interrupt_on`` (the resolved per-tool configs: with a
    gate or policy file, the tools whose entry can ask for approval, with the decision types
    it may allow), ``description_prefix``, ``edit_notice`` and ``interrupt_mode``
    (always ``"batched"``). They are read at construction: changing them afterwards
    changes nothing.
    """

    # Not LangChain's: its review runs in ``after_model`` (a graph node) and its state has
    # an extra channel. signoff works in the wrap hooks, so both go back to the base's —
    # ``create_agent`` adds a node only for a hook overridden relative to AgentMiddleware.
    state_schema = vars(AgentMiddleware)["state_schema"]
    after_model = AgentMiddleware.after_model
    aafter_model = AgentMiddleware.aafter_model

    def __init__(
        self,
        interrupt_on: InterruptOn | Gate | str | os.PathLike[str] | None = None,
        *,
        gate: Gate | None = None,
        config: str | os.PathLike[str] | None = None,
        store: Store | None = None,
        description_prefix: str = "Tool execution requires approval",
        edit_notice: str | None = DEFAULT_EDIT_NOTICE,
        interrupt_mode: Literal["batched"] = "batched",
        mode: WaitMode = "interrupt",
        approver: str | None = None,
        principal: PrincipalSetting = None,
        agent: str | None = None,
        hold_ungated: bool = False,
    ) -> None:
        AgentMiddleware.__init__(self)  # not LangChain's __init__: signoff validates the policy
        if interrupt_mode not in ("batched", "per_call"):
            raise ValueError(
                f"interrupt_mode must be 'batched' or 'per_call', got {interrupt_mode!r}"
            )
        if interrupt_mode != "batched":
            raise ValueError(
                f"interrupt_mode={interrupt_mode!r} is not needed with SignoffMiddleware: "
                "ungated calls already run before the human decides, and decisions can be "
                "keyed by tool-call id. Leave interrupt_mode out."
            )
        if mode not in ("interrupt", "blocking"):
            raise ValueError(f"mode is 'interrupt' or 'blocking', got {mode!r}")
        self.gate, self.owns_gate = _resolve_gate(interrupt_on, gate, config, store)
        extras = self.gate.policy.interrupt_on_extras
        self.interrupt_mode = interrupt_mode
        self.edit_notice = edit_notice
        self.description_prefix = description_prefix
        self.interrupt_on: dict[str, InterruptOnConfig] = (
            _given_configs(interrupt_on)
            if isinstance(interrupt_on, Mapping)
            else _policy_configs(self.gate.policy)
        )
        self._settings = Settings(
            gate=self.gate,
            reviewer=StepReviewer(self.gate, extras, description_prefix),
            mode=mode,
            hold_ungated=hold_ungated,
            approver=approver,
            principal=principal,
            agent=agent,
            edit_notice=edit_notice,
        )

    @property
    def mode(self) -> WaitMode:
        return self._settings.mode

    # ------------------------------------------------------------------ model node
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResult:
        flow = model_flow(self._settings, request, _config())
        try:
            result: ModelResult = drive(flow, handler, self._settings.run_effect)
        finally:
            # An executed call's ledger entry committed while this step ran; it is settled
            # before the step ends, so the agent never returns with it still in flight.
            self._settings.flush()
        return result

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResult:
        await self._settings.aflush()  # left by a sync tools node (a mixed sync/async agent)
        flow = model_flow(self._settings, request, _config(), is_async=True)
        result: ModelResult = await adrive(flow, handler)
        return result

    # ------------------------------------------------------------------ tools node
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolResult],
    ) -> ToolResult:
        _require_innermost(handler)
        result: ToolResult = drive(
            tool_flow(self._settings, request), handler, self._settings.run_effect
        )
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        _require_innermost(handler)
        result: ToolResult = await adrive(tool_flow(self._settings, request), handler)
        return result

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the gate if this middleware created it (flushes the audit log)."""
        self._settings.flush()
        if self.owns_gate:
            self.gate.close()

    async def aclose(self) -> None:
        await self._settings.aflush()
        if self.owns_gate:
            await self.gate.aclose()

    def __repr__(self) -> str:
        return f"<SignoffMiddleware mode={self.mode} policy={self.gate.policy!r}>"


# LangChain inspects each hook's signature at every call (see _hooks): make that free.
_hooks.install(
    SignoffMiddleware, ("wrap_model_call", "awrap_model_call", "wrap_tool_call", "awrap_tool_call")
)


def _resolve_gate(
    interrupt_on: InterruptOn | Gate | str | os.PathLike[str] | None,
    gate: Gate | None,
    config: str | os.PathLike[str] | None,
    store: Store | None,
) -> tuple[Gate, bool]:
    """The gate from exactly one source; True when the middleware built (and owns) it."""
    if isinstance(interrupt_on, Gate):
        interrupt_on, gate = None, _one(gate, interrupt_on)
    elif isinstance(interrupt_on, str | os.PathLike):
        interrupt_on, config = None, _one(config, interrupt_on)
    sources = [s for s in (interrupt_on, gate, config) if s is not None]
    if len(sources) != 1:
        raise ValueError(
            "give SignoffMiddleware exactly one of: an interrupt_on mapping, a Gate, or a "
            "policy file path"
        )
    if store is not None and interrupt_on is None:
        raise ValueError("store= goes with interrupt_on; a gate or policy file names its own")
    if gate is not None:
        return _local(gate), False
    if config is not None:
        return _local(Gate.from_config(config)), True
    assert interrupt_on is not None
    return Gate.from_interrupt_on(interrupt_on, store=store), True


def _given_configs(interrupt_on: InterruptOn) -> dict[str, InterruptOnConfig]:
    """LangChain's resolution: True → every decision type, a dict as given, False → left out."""
    resolved: dict[str, InterruptOnConfig] = {}
    for name, config in interrupt_on.items():
        if config is True:
            resolved[name] = InterruptOnConfig(allowed_decisions=list(DECISION_TYPES))
        elif isinstance(config, Mapping):
            resolved[name] = config  # type: ignore[assignment]  # validated by the policy
    return resolved


def _policy_configs(policy: Policy) -> dict[str, InterruptOnConfig]:
    """Per tool named in ``tools:``, the decision types its approvals may allow.

    A tool whose entry never asks (allow or deny only) is left out, as ``False`` is in
    LangChain's mapping. Glob entries and ``defaults.unknown_tool`` have no tool name and are
    not listed; the policy, not this mapping, decides each call.
    """
    resolved: dict[str, InterruptOnConfig] = {}
    for name in policy.tool_keys:
        allowed = [
            decision
            for outcome in policy.outcomes_for(name, exact=True)[:-1]  # on_error is no entry's
            if outcome.kind == "require_approval"
            for decision in outcome.spec.allowed_decisions
        ]
        if allowed:
            resolved[name] = InterruptOnConfig(allowed_decisions=list(dict.fromkeys(allowed)))
    return resolved


def _one(first: Any, second: Any) -> Any:
    if first is not None:
        raise ValueError("the gate (or policy file) was given twice")
    return second


def _local(gate: Any) -> Gate:
    if not isinstance(gate, Gate):
        raise SignoffError(
            f"SignoffMiddleware needs a local signoff Gate, got {type(gate).__name__}: a "
            "remote gate (a `remote:` config section) is not supported by the LangChain "
            "integration yet; point the config at the store instead (the server can share it)"
        )
    return gate


def _config() -> RunnableConfig:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph (unit tests of a handler)
        return {}


def _require_innermost(handler: Callable[..., Any]) -> None:
    """Another ``wrap_tool_call`` middleware inside us could change a call after review."""
    if getattr(handler, "__module__", "").startswith("langchain.agents"):
        raise SetupError(
            "SignoffMiddleware must be the last entry of create_agent(middleware=[...]): it "
            "has to see each tool call after every other middleware changed it, and another "
            "tool-wrapping middleware is listed after it. Move SignoffMiddleware to the end."
        )
