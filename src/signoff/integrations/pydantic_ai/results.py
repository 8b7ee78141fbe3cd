"""``results``: turn decisions made anywhere into Pydantic AI's ``DeferredToolResults``.

An approver decides in the inbox, the CLI, Slack… ``results(requests, gate)`` reads each
approval the run is waiting for from signoff's store:

* approved → ``ToolApproved()``; edited → ``ToolApproved(override_args=...)``;
* rejected, expired, cancelled, answered → ``ToolDenied(message=...)`` (the text the model reads);
* still waiting → :class:`NotDecided` (``wait=True`` waits for it instead): Pydantic AI needs
  a result for every deferred call, so a partial answer cannot continue the run.

Calls that signoff did not ask about (no ``signoff_request_id`` in their metadata) are left out.
The toolset re-checks the store before running anything, so these results are a convenience,
not the authority.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ToolCallPart
from pydantic_core import to_jsonable_python

from signoff.gate import Gate, messages
from signoff.gate.resumed import changed, local_gate
from signoff.model import ApprovalRequest, NotFound, SignoffError, ToolCall
from signoff.policy.redact import merge_edit


class NotDecided(SignoffError):
    """Some of the run's approvals are still waiting for a human (``request_ids``)."""

    def __init__(self, request_ids: list[str]) -> None:
        self.request_ids = request_ids
        super().__init__(
            f"still waiting for a human decision: signoff request(s) {', '.join(request_ids)}; "
            "call results(..., wait=True) to wait, or try again once decided"
        )


REQUEST_ID = "signoff_request_id"
"""The key of ``DeferredToolRequests.metadata[call id]`` naming signoff's request."""


def results(
    requests: DeferredToolRequests,
    gate: Gate | str | Any,
    *,
    wait: bool = False,
    timeout: float | None = None,
) -> DeferredToolResults:
    """The ``DeferredToolResults`` signoff's store has decided for ``requests``.

    ``gate`` is a :class:`~signoff.Gate` or the path of a ``signoff.yaml``.
    ``wait=True`` waits (at most ``timeout`` seconds per request) for decisions still missing;
    :class:`NotDecided` is raised if any is still missing after that.
    """
    gate = local_gate(gate, "results")
    return gate.run_sync(aresults(requests, gate, wait=wait, timeout=timeout))


async def aresults(
    requests: DeferredToolRequests,
    gate: Gate | str | Any,
    *,
    wait: bool = False,
    timeout: float | None = None,
) -> DeferredToolResults:
    """Async twin of :func:`results`."""
    gate = local_gate(gate, "aresults")
    out = DeferredToolResults()
    undecided: list[str] = []
    for part in requests.approvals:
        request_id = (requests.metadata.get(part.tool_call_id) or {}).get(REQUEST_ID)
        if not isinstance(request_id, str):
            continue  # not a call signoff asked about
        try:
            req = await gate.get(request_id)
        except NotFound:
            continue
        if part.tool_call_id not in {a.tool_call_id for a in req.action_requests}:
            continue  # metadata pointing at another request: not ours to answer
        if req.call(part.tool_call_id).resolution is None and wait:
            req = await gate.await_request(req.id, timeout)
        answer = _answer(gate, req, part)
        if answer is None:
            undecided.append(req.id)
            continue
        out.approvals[part.tool_call_id] = answer
        out.metadata[part.tool_call_id] = {REQUEST_ID: req.id}
    if undecided:
        raise NotDecided(sorted(set(undecided)))
    return out


def _answer(
    gate: Gate, req: ApprovalRequest, part: ToolCallPart
) -> ToolApproved | ToolDenied | None:
    call = req.call(part.tool_call_id)
    if call.resolution is None:
        return None
    asked = req.action_request(part.tool_call_id)
    args = part.args_as_dict()
    if part.tool_name != asked.name or to_jsonable_python(args) != dict(asked.args):
        return ToolDenied(changed(ToolCall(part.tool_name, args, part.tool_call_id)))
    if call.resolution == "edited":
        return ToolApproved(
            override_args=merge_edit(args, call.action.args, gate.policy.secret_keys)
        )
    if call.runnable:
        return ToolApproved()
    return ToolDenied(messages.outcome_text(req, call, part.tool_call_id))
