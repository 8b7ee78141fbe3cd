"""``signoff demo`` in web mode: the server, the demo policy, and a scripted *remote* agent.

The agent talks to the server exactly as a production agent would — a
:class:`~signoff.client.RemoteGate` with an agent token, long-polling for decisions — and the
newcomer decides in the browser, signed in through a one-click login link. Without a
terminal (CI, ``make demo`` piped) an auto-approver decides through the HTTP API after a
short pause, so the demo always finishes on its own.
"""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
import threading
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from signoff.cli import render
from signoff.cli.demo import AUTO_ANSWERS, SCENARIO, _decision, play_scenario
from signoff.client import RemoteGate
from signoff.gate import Gate
from signoff.policy import Policy
from signoff.server import ServerThread, create_app, create_token
from signoff.server.links import LinkIssuer

SERVER_SECTIONS = """

# Added by `signoff demo` (web mode): the server's settings.
serve:
  host: {host}
  port: {port}
auth:
  admin_roles: [admin]
  login_link_ttl: 4h
"""
AGENT = "demo-agent"


def run_web_demo(
    out: Console,
    *,
    auto: bool,
    workdir: Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    delay: float = 0.3,
) -> int:
    tmp = tempfile.TemporaryDirectory(prefix="signoff-demo-") if workdir is None else None
    workdir = Path(tmp.name) if tmp is not None else workdir
    assert workdir is not None
    workdir.mkdir(parents=True, exist_ok=True)
    port = port if _free(host, port) else 0
    policy_path = workdir / "signoff.yaml"
    policy_path.write_text(
        files("signoff.cli").joinpath("demo.yaml").read_text("utf-8")
        + SERVER_SECTIONS.format(host=host, port=port),
        encoding="utf-8",
    )
    policy = Policy.load(policy_path)
    app = create_app(Gate(policy), owns_gate=True)
    server = ServerThread(app, host, port)
    url = server.start()
    try:
        tokens = asyncio.run(_tokens(app, policy))
        logins = asyncio.run(_login_links(app.state.links, policy))
        _welcome(out, url, policy_path, logins, auto)
        watcher = Watcher(url, tokens, out, auto=auto, delay=delay)
        watcher.start()
        results = _run_agent(url, tokens[AGENT], out)
        _summary(out, results, policy_path, tmp is not None)
        if not auto:
            out.print(f"The inbox stays up at {url}/inbox (History, Audit). Ctrl-C to stop.")
            threading.Event().wait()
    except KeyboardInterrupt:
        out.print("\n[yellow]demo stopped[/]")
    finally:
        server.stop()
        if tmp is not None:
            tmp.cleanup()
    return 0


def _free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


async def _tokens(app: Any, policy: Policy) -> dict[str, str]:
    db = app.state.signoff.db
    tokens = {AGENT: (await create_token(db, "agent", AGENT))[0]}
    for person in policy.people:
        tokens[person] = (await create_token(db, "approver", person))[0]
    return tokens


async def _login_links(links: LinkIssuer, policy: Policy) -> dict[str, str]:
    return {
        pid: await links.login_link(pid)
        for pid, person in policy.people.items()
        if person.roles  # erin asks; the others decide
    }


def _welcome(out: Console, url: str, path: Path, logins: dict[str, str], auto: bool) -> None:
    out.print(f"[bold]signoff demo[/] (web) — policy {path}")
    out.print(f"Inbox: [bold]{url}/inbox[/]   API: {url}/v1   OpenAPI: {url}/openapi.json")
    out.print("Sign in as an approver with a one-click link (each works once):")
    for person, link in logins.items():
        out.print(f"  {person:6} {link}")
    if auto:
        out.print("(no terminal: an auto-approver decides through the API after a short pause)")
    else:
        out.print("Approve, edit and reject in the browser; the agent below continues at once.")
    out.print("An agent works for [bold]erin[/]:\n")


def _run_agent(url: str, token: str, out: Console) -> list[str]:
    gate = RemoteGate(url, token)
    tools = {step.tool: _tool(gate, step.tool) for step in SCENARIO}
    try:
        return play_scenario(gate, tools, out, AGENT)
    finally:
        gate.close()


def _tool(gate: RemoteGate, name: str) -> Any:
    def run(**kwargs: Any) -> str:
        return f"ran {name} with {json.dumps(kwargs)}"

    run.__name__ = name
    return gate.guard(run, name=name, on_reject="return")


def _summary(out: Console, results: list[str], path: Path, temporary: bool) -> None:
    out.print("[bold]What happened[/]")
    for outcome in results:
        out.print(render.line(f"  {outcome}"))
    out.print(
        f"\nAudit log: `signoff audit export --config {path}`"
        + (" (a temporary directory: use --dir to keep it)" if temporary else "")
    )


class Watcher(threading.Thread):
    """Follows ``/v1/events``: announces each request; with ``auto``, also decides it
    through the API as the scripted approver (a stand-in for the person at the browser)."""

    def __init__(
        self, url: str, tokens: dict[str, str], out: Console, *, auto: bool, delay: float
    ) -> None:
        super().__init__(name="signoff-demo-watcher", daemon=True)
        self.url, self.tokens, self.out, self.auto, self.delay = url, tokens, out, auto, delay
        self.scripts: dict[str, list[tuple[str, str, Any]]] = {}

    def _client(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.tokens[who]}"},
            timeout=httpx.Timeout(30.0, read=None),
        )

    def run(self) -> None:
        try:
            with self._client("alice") as client, client.stream("GET", "/v1/events") as events:
                for line in events.iter_lines():
                    if line.startswith("data:"):
                        data = json.loads(line[5:])
                        if data["status"] == "pending" and data["type"] in ("created", "decided"):
                            self._handle(client, data)
        except httpx.HTTPError:
            return  # the server stopped

    def _handle(self, client: httpx.Client, event: dict[str, Any]) -> None:
        rid = event["id"]
        if event["type"] == "created" and not self.auto:
            self.out.print(f"[yellow]⏳ waiting for you:[/] {self.url}/requests/{rid}")
        if not self.auto:
            return
        time.sleep(self.delay)
        from signoff.client.remote import parse_request

        req = parse_request(client.get(f"/v1/requests/{rid}").json())
        if not req.pending:
            return
        action = req.action_requests[0]
        key = (
            action.name,
            str(
                action.args.get("symbol")
                or action.args.get("table")
                or action.args.get("to")
                or action.args.get("command")
            ),
        )
        script = self.scripts.setdefault(
            rid, list(AUTO_ANSWERS.get(key, [("n", "alice", "no script for this call")]))
        )
        if not script:
            return
        choice, who, extra = script.pop(0)
        decision = _decision(self.out, req, choice, extra, True)
        if decision is None:
            return
        self.out.print(
            render.line(
                (f"{who} decides in the API:", "dim"),
                f" {decision['type']}",
                " for the whole thread" if decision.get("scope") == "thread" else "",
                f" ({decision.get('message')})" if decision.get("message") else "",
            )
        )
        with self._client(who) as approver:
            answer = approver.post(f"/v1/requests/{rid}/decisions", json={"decisions": [decision]})
        if answer.status_code != 200:
            self.out.print(render.line((str(answer.json().get("message")), "red")))
