"""``signoff mcp-proxy`` and ``signoff inquiry-server`` (the ``signoff[mcp]`` extra).

``mcp`` is imported inside the commands, so the rest of the CLI works without the extra.
"""

from __future__ import annotations

import getpass
import importlib
import inspect
import logging
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from signoff.cli.main import ConfigOpt, err, fail, load_policy

if TYPE_CHECKING:
    from signoff.gate import Gate

PRINCIPAL_ENV = "SIGNOFF_PRINCIPAL"

TransportOpt = Annotated[
    str, typer.Option("--transport", help="stdio (for client configs) or http (streamable HTTP).")
]
HostOpt = Annotated[str, typer.Option("--host", help="HTTP: address to listen on.")]
PortOpt = Annotated[int, typer.Option("--port", help="HTTP: port to listen on.")]
PathOpt = Annotated[str, typer.Option("--path", help="HTTP: the MCP endpoint path.")]
PrincipalOpt = Annotated[
    str | None,
    typer.Option(
        "--principal",
        help=f"Who the agent acts for (default ${PRINCIPAL_ENV} or your user name).",
        show_default=False,
    ),
]
ThreadOpt = Annotated[
    str | None, typer.Option("--thread", help="Thread id (default: one per connection).")
]
AgentOpt = Annotated[
    str | None, typer.Option("--agent", help="Agent name in requests (default: client name).")
]
YoloOpt = Annotated[
    bool,
    typer.Option("--yolo", help="Approve every call that needs approval at once (audited)."),
]
NonInteractiveOpt = Annotated[
    bool, typer.Option("--non-interactive", help="Nobody can answer: refuse at once.")
]
HeartbeatOpt = Annotated[
    float, typer.Option("--heartbeat", help="Seconds between progress notes while waiting.")
]
ClientTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--client-timeout",
        help="The MCP client's tool-call timeout in seconds, to check it against the "
        "deadlines (default: $MCP_TOOL_TIMEOUT in ms, when set).",
        show_default=False,
    ),
]
NoElicitOpt = Annotated[
    bool, typer.Option("--no-elicitation", help="Never ask inside the MCP client.")
]


def register(app: typer.Typer) -> None:
    app.command("mcp-proxy", no_args_is_help=True)(mcp_proxy)
    app.command("inquiry-server")(inquiry_server)


def mcp_proxy(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The upstream server's command, after `--`.", show_default=False),
    ] = None,
    upstream: Annotated[
        list[str] | None,
        typer.Option(
            "--upstream",
            help="NAME='command args…' or NAME=https://…/mcp; repeat for several "
            "(tools become NAME__tool).",
            show_default=False,
        ),
    ] = None,
    config: ConfigOpt = None,
    principal: PrincipalOpt = None,
    thread: ThreadOpt = None,
    agent: AgentOpt = None,
    yolo: YoloOpt = False,
    non_interactive: NonInteractiveOpt = False,
    heartbeat: HeartbeatOpt = 5.0,
    upstream_timeout: Annotated[
        float | None,
        typer.Option(
            "--upstream-timeout",
            help="Seconds an upstream call may take, counted from approval.",
            show_default=False,
        ),
    ] = None,
    upstream_connect_timeout: Annotated[
        float,
        typer.Option(
            "--upstream-connect-timeout",
            help="Seconds an upstream may take to start and complete the MCP handshake; "
            "the proxy exits naming it when it does not.",
        ),
    ] = 30.0,
    client_timeout: ClientTimeoutOpt = None,
    no_elicitation: NoElicitOpt = False,
    prompt_tty: Annotated[
        bool,
        typer.Option(
            "--prompt-tty",
            help="Also ask in this terminal (/dev/tty, never the MCP stdio stream) where the "
            "rule lets the principal decide; off by default: the MCP client owns the terminal.",
        ),
    ] = False,
    transport: TransportOpt = "stdio",
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8767,
    path: PathOpt = "/mcp",
    max_sessions: Annotated[
        int,
        typer.Option(
            "--max-sessions",
            min=1,
            help="HTTP: most client sessions served at once (each has its own upstreams).",
        ),
    ] = 16,
    auth_token: Annotated[
        str | None,
        typer.Option(
            "--auth-token",
            help="HTTP: require `Authorization: Bearer <token>`; give it as ${ENV_VAR}.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Put human sign-off in front of MCP servers: `signoff mcp-proxy -c signoff.yaml -- CMD…`."""
    from signoff.integrations.mcp import (
        ProxyOptions,
        UpstreamError,
        build_proxy,
        command_upstream,
        parse_upstream,
    )
    from signoff.integrations.mcp.timeouts import client_wait_s

    try:
        if command and upstream:
            raise UpstreamError(
                "use either `-- <command…>` (one upstream) or --upstream NAME=… (one or more)"
            )
        specs = (
            [command_upstream(command)] if command else [parse_upstream(u) for u in upstream or []]
        )
        if not specs:
            raise UpstreamError(
                "give the upstream server: `signoff mcp-proxy -- <command…>` or --upstream"
            )
    except UpstreamError as exc:
        fail(str(exc), 2)
    token = _auth_token(auth_token, transport)
    gate = _gate(config, yolo=yolo, non_interactive=non_interactive, prompt_tty=prompt_tty)
    wait = client_wait_s(client_timeout)
    _warn_tiers(gate, wait)
    options = ProxyOptions(
        principal=principal or _default_principal(),
        thread=thread,
        agent=agent,
        heartbeat_s=heartbeat,
        upstream_timeout_s=upstream_timeout,
        in_client=not no_elicitation,
        client_wait_s=wait,
        connect_timeout_s=upstream_connect_timeout,
        per_session=transport == "http",
        max_sessions=max_sessions,
    )
    server = build_proxy(gate, specs, options)
    _run(gate, server, transport, host, port, path, auth_token=token)


def inquiry_server(
    config: ConfigOpt = None,
    principal: PrincipalOpt = None,
    thread: ThreadOpt = None,
    agent: AgentOpt = None,
    yolo: YoloOpt = False,
    non_interactive: NonInteractiveOpt = False,
    heartbeat: HeartbeatOpt = 5.0,
    default_timeout: Annotated[
        float, typer.Option("--default-timeout", help="Seconds to wait when the agent says not.")
    ] = 300.0,
    max_timeout: Annotated[
        float, typer.Option("--max-timeout", help="Longest wait an agent may ask for.")
    ] = 3600.0,
    suggester: Annotated[
        str | None,
        typer.Option(
            "--suggester",
            help="module:function filling default_answer when the agent gives none "
            "(an alias of the policy's inquiries.suggest, which applies without it).",
            show_default=False,
        ),
    ] = None,
    client_timeout: ClientTimeoutOpt = None,
    no_elicitation: NoElicitOpt = False,
    answer_tool: Annotated[
        str,
        typer.Option(
            "--answer-tool",
            help="Who may call answer_inquiry: off, other-sessions (another client over "
            "HTTP, never the one that asked; never offered on stdio) or all.",
        ),
    ] = "other-sessions",
    transport: TransportOpt = "stdio",
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8766,
    path: PathOpt = "/mcp",
) -> None:
    """A human as an MCP tool: send_inquiry(question | questions, choices?, …, timeout_s?)."""
    from signoff.integrations.mcp import InquiryOptions, build_inquiry_server
    from signoff.integrations.mcp.inquiry_answering import ANSWER_TOOL_MODES
    from signoff.integrations.mcp.timeouts import client_wait_s, tier_warning

    if answer_tool not in ANSWER_TOOL_MODES:
        fail(f"--answer-tool is one of {', '.join(ANSWER_TOOL_MODES)}", 2)

    # Nobody answers questions unattended: --yolo and --non-interactive both say "unavailable".
    gate = _gate(config, yolo=yolo, non_interactive=non_interactive)
    wait = client_wait_s(client_timeout)
    warning = tier_warning(wait, default_timeout)
    if warning:
        err.print(f"[yellow]warning:[/] {warning}")
    fallback = gate.inquiry_judges.settings.fallback
    if fallback is not None and fallback.after >= default_timeout:
        err.print(
            f"[yellow]warning:[/] inquiries.fallback.after ({fallback.after:g} s) is not shorter "
            f"than --default-timeout ({default_timeout:g} s): questions asked without a longer "
            "timeout_s get no fallback answer"
        )
    options = InquiryOptions(
        principal=principal or _default_principal(),
        thread=thread,
        agent=agent,
        default_timeout_s=default_timeout,
        max_timeout_s=max_timeout,
        heartbeat_s=heartbeat,
        in_client=not no_elicitation,
        suggester=_load_suggester(suggester) if suggester else None,
        answer_tool=answer_tool,  # type: ignore[arg-type]  # checked above
        many_sessions=transport == "http",
    )
    _run(gate, build_inquiry_server(gate, options), transport, host, port, path)


# ---------------------------------------------------------------------- helpers
def _gate(
    config: Path | None, *, yolo: bool, non_interactive: bool, prompt_tty: bool = False
) -> Gate:
    from signoff.channels import LogChannel
    from signoff.channels.console import for_mcp
    from signoff.gate import Gate

    if yolo and non_interactive:
        fail("choose one of --yolo and --non-interactive", 2)
    policy = load_policy(config)
    if policy.sections.get("remote"):
        fail("remote servers are not supported by the MCP commands yet; use a local store", 2)
    logging.basicConfig(level=logging.INFO, format="signoff: %(message)s")
    return Gate(
        policy,
        # the flag, else $SIGNOFF_NON_INTERACTIVE, else gate.non_interactive.enabled
        interactive=False if non_interactive else None,
        auto_approve=yolo,
        channels=[LogChannel(), *for_mcp(policy, prompt_tty=prompt_tty)],
    )


def _warn_tiers(gate: Gate, wait: float | None) -> None:
    from signoff.integrations.mcp.timeouts import longest_deadline, tier_warning

    warning = tier_warning(wait, longest_deadline(gate.policy))
    if warning:
        err.print(f"[yellow]warning:[/] {warning}")


def _auth_token(value: str | None, transport: str) -> str | None:
    """The bearer token from ``--auth-token ${ENV}`` (a secret is never written inline)."""
    if value is None:
        return None
    if transport != "http":
        fail("--auth-token applies to --transport http only", 2)
    match = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value.strip())
    if match is None:
        fail("--auth-token takes an environment variable reference, e.g. '${MCP_TOKEN}'", 2)
    token = os.environ.get(match.group(1), "")
    if not token.strip():
        fail(f"--auth-token: the environment variable {match.group(1)} is empty or unset", 2)
    return token


def _run(
    gate: Gate,
    server: Any,
    transport: str,
    host: str,
    port: int,
    path: str,
    *,
    auth_token: str | None = None,
) -> None:
    import anyio

    from signoff.integrations.mcp import serve
    from signoff.integrations.mcp.serving import Transport, body_limit_for

    if transport not in ("stdio", "http"):
        fail("--transport is stdio or http", 2)
    if transport == "http":
        err.print(f"serving MCP on http://{host}:{port}{path}")
    mode: Transport = "http" if transport == "http" else "stdio"
    run = partial(
        serve,
        server,
        mode,
        host=host,
        port=port,
        path=path,
        auth_token=auth_token,
        max_body_bytes=body_limit_for(gate.limits.max_args_bytes),
        body_timeout=body_timeout_of(gate) if mode == "http" else None,
    )
    try:
        anyio.run(run, backend_options=_loop_options())
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        fail(_root_cause(exc))
    finally:
        gate.close()


def body_timeout_of(gate: Gate) -> float:
    """The policy's ``serve.body_timeout``: what ``signoff serve`` allows a request body."""
    from signoff.server.settings import ServerSettings

    with gate.policy.locating():  # checked when the policy loaded: a bad value names its line
        return ServerSettings.from_sections(gate.policy.sections).serve.body_timeout


def _loop_options() -> dict[str, Any]:
    """uvloop where it is installed (the ``server`` extra), as ``signoff serve`` gets from
    uvicorn: a proxied HTTP call crosses two sockets and a dozen tasks; measured ~5-8% less
    proxy CPU per call (docs/benchmarks.md)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def _root_cause(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


def _default_principal() -> str:
    found = os.environ.get(PRINCIPAL_ENV)
    if found:
        return found
    try:
        return getpass.getuser()
    except Exception:
        return "anonymous"


def _load_suggester(spec: str) -> Callable[[str, Sequence[str] | None], Awaitable[str | None]]:
    module_name, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr or "suggest")
    except (ImportError, AttributeError) as exc:
        fail(f"cannot load the suggester {spec!r}: {exc}", 2)
    if inspect.iscoroutinefunction(fn):
        return fn  # type: ignore[no-any-return]

    async def call(question: str, choices: Sequence[str] | None) -> str | None:
        value = fn(question, choices)
        return None if value is None else str(value)

    return call
