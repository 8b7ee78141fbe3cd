"""One end-to-end run of ``signoff watch`` in a real terminal: tmux on a private socket,
the CLI as a user starts it, keys sent as typed. The test waits on the store (a push
wait) and on what the pane shows, never on time."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import Gate
from tests.tui.conftest import ask

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

#: A guard against a hang, not a measurement: each look at the pane is one capture.
LOOKS = 2000


class Tmux:
    def __init__(self, cwd: Path) -> None:
        self.socket = f"signoff-test-{uuid.uuid4().hex[:8]}"
        self.cwd = cwd

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    def start(self, command: list[str]) -> None:
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
        subprocess.run(
            ["tmux", "-L", self.socket, "new-session", "-d", "-s", "watch", "-x", "160",
             "-y", "40", "-c", str(self.cwd), *command],
            check=True, env=env,
        )  # fmt: skip

    def screen(self) -> str:
        """What the pane shows ("" once the session has ended)."""
        done = subprocess.run(
            ["tmux", "-L", self.socket, "capture-pane", "-p", "-t", "watch"],
            capture_output=True,
            text=True,
        )
        return done.stdout if done.returncode == 0 else ""

    def history(self) -> str:
        """Everything the pane printed, wrapped lines joined ("" once the session ended)."""
        done = subprocess.run(
            ["tmux", "-L", self.socket, "capture-pane", "-p", "-J", "-S", "-", "-t", "watch"],
            capture_output=True,
            text=True,
        )
        return done.stdout if done.returncode == 0 else ""

    def until(self, shown: Callable[[str], bool], what: str, *, everything: bool = False) -> str:
        screen = ""
        for _ in range(LOOKS):
            screen = self.history() if everything else self.screen()
            if shown(screen):
                return screen
            subprocess.run(["tmux", "-L", self.socket, "wait-for", "-S", "x"], check=False)
        raise AssertionError(f"the terminal never showed {what}:\n{screen}")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "watch", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    yield t
    t.close()


def test_watch_in_a_real_terminal(config: Path, agent: Gate, tmux: Tmux) -> None:
    req = ask(agent)
    signoff = [sys.executable, "-m", "signoff", "watch", "--config", str(config), "--as", "bob"]
    tmux.start(signoff)
    screen = tmux.until(lambda s: "transfer_funds" in s, "the pending request")
    assert "billing-bot → erin" in screen and "needs you" in screen
    tmux.keys("y")
    decided = agent.run_sync(agent.store.wait(req.id))  # pushed by the store, no polling
    assert decided.calls[0].resolution == "approved"
    assert decided.decisions[0].approver == "bob" and decided.decisions[0].channel == "cli"
    tmux.until(lambda s: "Approved by bob" in s, "the note")
    second = ask(agent, "deploy", {"env": "prod"})
    tmux.until(lambda s: "deploy" in s and "waiting for others" in s, "the new request")
    tmux.keys("q")
    tmux.until(lambda s: "signoff watch" not in s, "the app quitting")
    assert agent.run_sync(agent.get(second.id)).pending


PROMPT_TTY_AGENT = """
import os, sys, textwrap
from signoff import Gate, Policy
from signoff.channels.console import for_mcp

# stdio away from the terminal, as for an MCP stdio server: only /dev/tty reaches it
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
policy = Policy.from_interrupt_on({"deploy": True})
with Gate(policy, channels=for_mcp(policy, prompt_tty=True), interactive=True) as gate:
    deploy = gate.guard(lambda env: f"deployed {env}", name="deploy", on_reject="return")
    with gate.context(principal="erin", agent="mcp-client", thread="t-1"):
        result = deploy(env="prod")
with open(sys.argv[1], "w") as out:
    out.write(result)
"""


def test_prompt_tty_asks_on_dev_tty_with_stdio_elsewhere(tmp_path: Path, tmux: Tmux) -> None:
    result, script = tmp_path / "result.txt", tmp_path / "agent.py"
    script.write_text(PROMPT_TTY_AGENT)
    # started from a shell, as a user starts an MCP client; the shell waits for "done"
    agent = f"'{sys.executable}' '{script}' '{result}'"
    tmux.start(["sh", "-c", f"{agent}; echo agent-exited; read done"])
    screen = tmux.until(lambda s: "your answer:" in s, "the prompt on /dev/tty")
    assert 'deploy(env="prod")' in screen and "[y/1] approve" in screen
    tmux.keys("y", "Enter")
    tmux.until(lambda s: "agent-exited" in s, "the agent finishing")
    assert result.read_text() == "deployed prod"


#: An MCP client that starts the proxy in its own session, keeping the terminal as the
#: proxy's controlling terminal (as Node's ``child_process.spawn`` does): raw JSON-RPC lines.
SAME_SESSION_CLIENT = """
import json, os, subprocess, sys

config, upstream, out = sys.argv[1:4]
proxy = subprocess.Popen(
    [sys.executable, "-m", "signoff", "mcp-proxy", "-c", config, "--principal", "erin",
     "--prompt-tty", "--no-elicitation", "--", sys.executable, upstream],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
)
hello = {"protocolVersion": "2025-11-25", "capabilities": {},
         "clientInfo": {"name": "raw-client", "version": "0"}}
call = {"name": "delete_file", "arguments": {"path": "b.txt"}}
for message in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
):
    proxy.stdin.write(json.dumps(message) + "\\n")
    proxy.stdin.flush()
lines = []
for line in proxy.stdout:  # the MCP stream: every line must be JSON-RPC
    lines.append(json.loads(line))
    if lines[-1].get("id") == 2:
        break
proxy.stdin.close()
proxy.wait()
with open(out, "w") as done:
    done.write(lines[-1]["result"]["content"][0]["text"])
"""

#: The same call from the Python MCP SDK's client, which starts the proxy in a new session.
SDK_CLIENT = """
import os, sys
import anyio
from mcp import Client, StdioServerParameters

config, upstream, out = sys.argv[1:4]
signoff = ["-m", "signoff", "mcp-proxy", "-c", config, "--principal", "erin", "--prompt-tty",
           "--no-elicitation", "--", sys.executable, upstream]


async def main() -> None:
    params = StdioServerParameters(command=sys.executable, args=signoff, env=dict(os.environ))
    async with Client(params) as client:
        result = await client.call_tool("delete_file", {"path": "b.txt"})
    with open(out, "w") as done:
        done.write(" ".join(c.text for c in result.content if hasattr(c, "text")))


anyio.run(main)
"""

PROXY_POLICY = """
version: 1
store: sqlite:///signoff.db
people:
  erin: {roles: []}
tools:
  delete_file:
    default: require_approval
    approvers: {users: [erin]}
    forbid_self_approval: false
"""


def start_client(tmp_path: Path, tmux: Tmux, client: str) -> tuple[Path, Path]:
    """``client`` started from a shell in the terminal, as a user starts an MCP client; the
    shell waits for "done". Returns the config and the file the client writes its result to."""
    root = Path(__file__).resolve().parents[2]
    config, script, result = tmp_path / "signoff.yaml", tmp_path / "client.py", tmp_path / "out"
    config.write_text(PROXY_POLICY)
    script.write_text(client)
    upstream = root / "tests" / "integrations" / "mcp" / "upstream.py"
    path = os.pathsep.join([str(root), str(root / "src"), os.environ.get("PYTHONPATH", "")])
    command = f"'{sys.executable}' '{script}' '{config}' '{upstream}' '{result}'"
    tmux.start(["sh", "-c", f"PYTHONPATH='{path}' {command}; echo client-exited; read done"])
    return config, result


def decided(config: Path) -> Any:
    with Gate.from_config(config) as gate:
        [request] = gate.run_sync(gate.alist())
    return request


def test_mcp_proxy_prompt_tty_asks_on_the_terminal_not_on_the_mcp_stream(
    tmp_path: Path, tmux: Tmux
) -> None:
    """The real command: the prompt appears on the terminal (``/dev/tty``), the answer typed
    there runs the upstream call, and the MCP stream carries only JSON-RPC."""
    config, result = start_client(tmp_path, tmux, SAME_SESSION_CLIENT)
    screen = tmux.until(lambda s: "your answer:" in s, "the prompt on /dev/tty")
    assert 'delete_file(path="b.txt")' in screen and "[y/1] approve" in screen
    tmux.keys("y", "Enter")
    tmux.until(lambda s: "client-exited" in s, "the client finishing")
    assert result.read_text() == "deleted b.txt"
    request = decided(config)
    assert request.decisions[0].approver == "erin" and request.decisions[0].channel == "console"


def test_mcp_proxy_prompt_tty_without_a_controlling_terminal_says_so_once(
    tmp_path: Path, tmux: Tmux
) -> None:
    """The Python SDK's client starts the proxy in a new session: no /dev/tty. The prompt
    turns itself off with one line naming why; the call waits for the other channels."""
    config, result = start_client(tmp_path, tmux, SDK_CLIENT)
    screen = tmux.until(
        lambda s: "signoff approve req_" in s, "the request's console line", everything=True
    )  # wrapped lines joined
    assert screen.count("interactive prompt is off") == 1
    assert "no controlling terminal to ask on (/dev/tty: No such device or address;" in screen
    assert "your answer:" not in screen
    request_id = screen.split("signoff approve ", 1)[1].split()[0]
    approve = [sys.executable, "-m", "signoff", "approve", request_id, "--as", "erin"]
    subprocess.run([*approve, "-c", str(config)], check=True, capture_output=True)
    tmux.until(lambda s: "client-exited" in s, "the client finishing")
    assert result.read_text() == "deleted b.txt"
    assert decided(config).decisions[0].channel == "cli"


@pytest.fixture
def served(config: Path) -> Iterator[str]:
    """A real ``signoff serve`` on loopback over the config's SQLite file; yields its URL
    once uvicorn says it is running (read from its output, line by line)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve = [sys.executable, "-m", "signoff", "serve", "--config", str(config), "--port"]
    proc = subprocess.Popen(
        [*serve, str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None
        said = []
        for line in proc.stdout:  # ends if the server exits
            said.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            raise AssertionError("signoff serve did not start:\n" + "".join(said))
        # keep reading its log, so a full pipe never blocks the server
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def test_watch_server_in_a_real_terminal(
    config: Path, agent: Gate, served: str, tmux: Tmux
) -> None:
    """``signoff watch --server`` against a real ``signoff serve``, the approver token from
    ``SIGNOFF_APPROVER_TOKEN``: the request arrives over ``/v1/events`` and ``y`` decides as
    the token's person."""
    create = ["token", "create", "--approver", "bob", "--json", "--config", str(config)]
    token = subprocess.run(
        [sys.executable, "-m", "signoff", *create], capture_output=True, text=True, check=True
    )
    secret = json.loads(token.stdout)["token"]
    signoff = [sys.executable, "-m", "signoff", "watch", "--server", served]
    tmux.start(["env", f"SIGNOFF_APPROVER_TOKEN={secret}", *signoff])
    tmux.until(lambda s: "0 pending" in s, "the empty inbox")
    req = ask(agent)  # after the inbox is up: it can only arrive through the event stream
    screen = tmux.until(lambda s: "transfer_funds" in s and "needs you" in s, "the request")
    assert "billing-bot → erin" in screen and served in screen
    tmux.keys("y")
    decided = agent.run_sync(agent.store.wait(req.id))
    assert decided.calls[0].resolution == "approved"
    assert decided.decisions[0].approver == "bob"
    tmux.until(lambda s: "Approved by bob" in s, "the note")
    tmux.keys("q")
    tmux.until(lambda s: "signoff watch" not in s, "the app quitting")


#: ``signoff demo --terminal``'s requests in order, and what the person at the keyboard types
#: at each: every key of the shared menu (edit, reject with a reason, approve, grant).
DEMO_ANSWERS = [
    ("e", "amount (50):", "25"),  # sell 50 GOOG: edited to 25
    ("2", "reason (the agent will see it):", "hedged"),  # sell AMZN: rejected
    ("1", None, None),  # delete orders #42
    ("y", None, None),  # transfer 50,000: bob, the first of two
    ("y", None, None),  # and carol
    ("n", "reason (the agent will see it):", "never"),  # curl | sh
    ("3", "? [y/n]:", "y"),  # rm -rf build: approve and grant for the thread, confirmed
]


def prompts(shown: str) -> int:
    """How many times the demo has asked "decide as NAME: …"."""
    return len(re.findall(r"decide as \w+: ", shown))


def test_demo_terminal_mode_is_the_shared_menu(tmp_path: Path, tmux: Tmux) -> None:
    """``signoff demo --terminal`` typed through in a real terminal with the menu's keys."""
    demo = f"'{sys.executable}' -m signoff demo --terminal --dir '{tmp_path / 'demo'}'"
    tmux.start(["sh", "-c", f"{demo}; echo demo-exited; read done"])
    for turn, (key, follow_up, answer) in enumerate(DEMO_ANSWERS, start=1):
        tmux.until(lambda s, n=turn: prompts(s) >= n, f"prompt {turn}", everything=True)
        tmux.keys(key, "Enter")
        if follow_up is not None and answer is not None:
            tmux.until(lambda s, f=follow_up: s.rstrip().endswith(f), follow_up, everything=True)
            tmux.keys(answer, "Enter")
    shown = tmux.until(lambda s: "demo-exited" in s, "the demo finishing", everything=True)
    for outcome in (
        'sell_stock({"symbol": "GOOG", "amount": 50}) → ran sell_stock with {"symbol": "GOOG", '
        '"amount": 25}',
        "User rejected the tool call for `sell_stock` with reason: hedged",
        "User rejected the tool call for `execute` with reason: never",
        'execute({"command": "rm -rf dist"}) → ran execute',  # granted: nobody asked
    ):
        assert outcome in shown
    assert prompts(shown) == len(DEMO_ANSWERS)
