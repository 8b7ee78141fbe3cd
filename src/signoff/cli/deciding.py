"""Where the decision commands act: the local store, or a signoff server.

* **Local** (the default): the CLI opens the store itself, trusted like any admin tool that
  can write the database file. ``--as`` names the person deciding and is *not*
  authenticated; the operating-system account that ran the command is recorded beside it
  (``os_user`` on each decision, with ``channel: cli``), so the audit shows who typed it.
* **Server** (``--server URL``, or a config whose ``remote:`` section names one): the command
  goes through the REST API with an approver token (``--token`` or
  ``$SIGNOFF_APPROVER_TOKEN``). The server records the token's person, so ``--as`` is refused.

Both modes print the same shapes (``--json`` included). A new decision command (``grant …``)
takes :data:`ServerOpt` and :data:`TokenOpt`, calls :func:`connect`, and talks to the API
with :meth:`Server.call`.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from signoff.cli import errors, render
from signoff.gate import Gate
from signoff.gate.core import resolve_config_path
from signoff.model import ApprovalRequest, PolicyError, SignoffError, Transition
from signoff.policy import Policy

if TYPE_CHECKING:
    from signoff.client.http import ApiClient

T = TypeVar("T")

APPROVER_TOKEN_ENV = "SIGNOFF_APPROVER_TOKEN"
#: How many requests ``pending`` lists, in both modes (the local gate's page size).
PENDING_LIMIT = 100

ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="Decide through this signoff server (default: the config's remote.url) as the "
        f"person of an approver token (--token or ${APPROVER_TOKEN_ENV}); --as is refused.",
        show_default=False,
    ),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        help=f"Approver token for the server (default: ${APPROVER_TOKEN_ENV}).",
        show_default=False,
    ),
]

out = Console(highlight=False, soft_wrap=True)

Build = Callable[[ApprovalRequest], list[dict[str, Any]]]


# ---------------------------------------------------------------------- local mode
def local_os_user() -> str | None:
    """The account running this process, or None when the system cannot say."""
    try:
        return getpass.getuser() or None
    except Exception:  # no login name, no passwd entry (some containers)
        return None


def require_as(acting_as: str | None) -> str:
    """The ``--as`` name a local decision needs (exit 2 without it)."""
    if not acting_as:
        errors.report(
            "say who decides with --as NAME (local mode, not authenticated), or decide "
            f"through a server with --server URL and an approver token (${APPROVER_TOKEN_ENV})",
            2,
        )
    return acting_as


class CliGate(Gate):
    """The local CLI's gate: every decision it stores through the ``cli`` channel carries the
    OS user who ran the command, in the request row and in its audit event."""

    def __init__(self, policy: Policy, *, os_user: str | None = None, **kwargs: Any) -> None:
        super().__init__(policy, **kwargs)
        self.os_user = os_user

    async def update(
        self, request_id: str, mutate: Callable[[ApprovalRequest], Transition]
    ) -> Transition:
        if self.os_user is None:
            return await super().update(request_id, mutate)
        os_user = self.os_user

        def stamped(fresh: ApprovalRequest) -> Transition:
            known = len(fresh.decisions)  # before: the mutation may change ``fresh`` itself
            tr = mutate(fresh)
            for record in tr.request.decisions[known:]:  # the ones just added
                if record.channel == "cli" and record.os_user is None:
                    record.os_user = os_user
            for event in tr.events:
                if event.data.get("channel") == "cli":
                    event.data.setdefault("os_user", os_user)
            return tr

        return await super().update(request_id, stamped)


# ---------------------------------------------------------------------- server mode
@dataclass(frozen=True, slots=True)
class Server:
    """A signoff server and the approver token the command acts with. ``policy`` is the
    local config when there is one (used only to mask secrets in ``show``)."""

    url: str
    token: str
    policy: Policy | None = None

    def run(self, work: Callable[[ApiClient], Awaitable[T]]) -> T:
        """Run ``work`` with one API client (errors come back as signoff's exceptions)."""
        try:
            from signoff.client.http import ApiClient  # the signoff[client] extra (httpx)
        except ImportError as exc:
            errors.report(f"--server needs the signoff[client] extra ({exc.name} is missing)", 2)

        async def main() -> T:
            api = ApiClient(self.url, self.token)
            try:
                return await work(api)
            finally:
                await api.aclose()

        return asyncio.run(main())

    def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        retry: bool = False,
    ) -> Any:
        """One API call. A person is waiting at the terminal: nothing is retried unless
        ``retry`` says so (only ever for reads; a decision is sent once)."""
        return self.run(
            lambda api: api.call(method, path, json=json, params=dict(params or {}), retry=retry)
        )


def connect(
    config: Path | None, server: str | None, token: str | None, *, acting_as: str | None
) -> Server | None:
    """The server a decision command must go through, or None for local mode.

    A server is used when ``--server`` is given or the config has a ``remote:`` section;
    then ``--as`` is an error (exit 2) and an approver token is required.
    """
    policy = _local_policy(config, with_server=server is not None)
    url = server or _remote_url(policy)
    if url is None:
        return None
    try:
        from signoff.policy.settings import check_http_url

        url = check_http_url(url.strip())
    except ValueError as exc:
        errors.report(f"--server: {exc}", 2)
    if acting_as is not None:
        errors.report(
            "--as is not accepted when deciding through a server: the server records the "
            f"person of your approver token ({url})",
            2,
        )
    secret = (token or os.environ.get(APPROVER_TOKEN_ENV, "")).strip()
    if not secret:
        errors.report(
            f"deciding through {url} needs an approver token: set ${APPROVER_TOKEN_ENV} or "
            "pass --token (create one with `signoff token create --approver NAME` on the server)",
            2,
        )
    return Server(url, secret, policy)


def _local_policy(config: Path | None, *, with_server: bool) -> Policy | None:
    """The config, when there is one. Without ``--server`` a missing file means local mode
    (which reports it); with ``--server`` the config is optional unless named with --config."""
    path = resolve_config_path(config)
    if not path.exists():
        if with_server and config is not None:
            errors.report(f"no policy file at {path}", 2)
        return None
    try:
        return Policy.load(path)
    except PolicyError as exc:
        errors.report(f"invalid policy:\n{exc}", 2)


def _remote_url(policy: Policy | None) -> str | None:
    section = policy.sections.get("remote") if policy is not None else None
    if not section:
        return None
    url = section.get("url")
    if not isinstance(url, str) or not url:
        errors.report("the config's remote: section has no url; pass --server URL", 2)
    from signoff.policy.settings import expand_env

    expanded: str = expand_env(url, "remote.url")
    return expanded


# ---------------------------------------------------------------------- the commands
def _request(data: Mapping[str, Any]) -> ApprovalRequest:
    from signoff.client.remote import parse_request

    return parse_request(data)


def _emit_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str))


def _answer(work: Callable[[], T]) -> T:
    """``work``'s result; the server's refusal as one line, exit 1 — as local mode exits."""
    try:
        return work()
    except SignoffError as exc:
        errors.report(str(exc), 1)


def get(srv: Server, request_id: str) -> ApprovalRequest:
    return _answer(lambda: _request(srv.call("GET", f"/v1/requests/{request_id}")))


def pending(srv: Server, thread: str | None, as_json: bool) -> None:
    """``signoff pending`` through the server: the pending requests the token may see."""
    reqs = _answer(lambda: srv.run(lambda api: _pending(api, thread)))
    if as_json:
        _emit_json([r.to_wire() for r in reqs])
        return
    render.pending_table(out, reqs)


async def _pending(api: ApiClient, thread: str | None) -> list[ApprovalRequest]:
    # The server pages before it filters by what the caller may see: follow the pages.
    params: dict[str, Any] = {"status": "pending", "limit": PENDING_LIMIT, "offset": 0}
    if thread is not None:
        params["thread"] = thread
    found: list[ApprovalRequest] = []
    while len(found) < PENDING_LIMIT:
        page = await api.call("GET", "/v1/requests", params=params)
        found += [_request(r) for r in page["requests"]]
        if page.get("next_offset") is None:
            break
        params["offset"] = page["next_offset"]
    return found[:PENDING_LIMIT]


def show(srv: Server, request_id: str, as_json: bool) -> None:
    req = get(srv, request_id)
    if as_json:
        _emit_json(req.to_wire())
        return
    render.request_detail(out, req, srv.policy)


def decide(srv: Server, request_id: str, build: Build, as_json: bool) -> None:
    """Read the request, build the decisions from it, send them once."""
    decisions = build(get(srv, request_id))
    body = {"decisions": [{k: v for k, v in d.items() if v is not None} for d in decisions]}
    path = f"/v1/requests/{request_id}/decisions"
    req = _answer(lambda: _request(srv.call("POST", path, json=body)))
    if as_json:
        _emit_json(req.to_wire())
        return
    render.decision_summary(out, req, _latest_approver(req))


def _latest_approver(req: ApprovalRequest) -> str:
    return req.decisions[-1].approver if req.decisions else ""


def cancel(srv: Server, request_id: str, reason: str | None, as_json: bool) -> None:
    """Cancel through the server (the agent that made it, or an admin)."""
    body = {"reason": reason} if reason is not None else {}
    path = f"/v1/requests/{request_id}/cancel"
    req = _answer(lambda: _request(srv.call("POST", path, json=body)))
    if as_json:
        _emit_json(req.to_wire())
        return
    out.print(f"cancelled {req.id}")
