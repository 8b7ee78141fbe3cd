"""Make docs/images/inbox.png (and request.png): the web inbox with the demo's requests.

Run: .venv/bin/python scripts/inbox-screenshot.py — needs Debian's chromium (make system).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from importlib.resources import files
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import sync_playwright

from signoff import Gate, Policy
from signoff.cli.demo import SCENARIO
from signoff.server import ServerThread, create_app, create_token
from signoff.store import MemoryStore

OUT = Path(__file__).resolve().parent.parent / "docs" / "images"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def run(coro: Any) -> Any:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def main() -> None:
    text = files("signoff.cli").joinpath("demo.yaml").read_text("utf-8")
    gate = Gate(Policy.from_yaml(text + "\nauth: {admin_roles: [admin]}\n"), MemoryStore())
    app = create_app(gate, owns_gate=True)
    with ServerThread(app) as server:
        db = app.state.signoff.db
        agent = run(create_token(db, "agent", "demo-agent"))[0]
        bob = run(create_token(db, "approver", "bob"))[0]
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {agent}"})
        transfer = None
        for i, step in enumerate(SCENARIO):
            r = client.post(
                "/v1/requests",
                json={
                    "tool_calls": [{"id": f"call_{i}", "name": step.tool, "args": step.args}],
                    "context": {
                        "principal": {"id": "erin"},
                        "thread": "demo-thread",
                        "user_request": "rebalance my portfolio, pay ACME and tidy up",
                        "reasoning": step.says,
                    },
                },
            )
            if step.tool == "transfer_funds":
                transfer = r.json()["id"]
        if transfer:  # one of the two finance approvals is in
            httpx.post(
                f"{server.url}/v1/requests/{transfer}/decisions",
                json=[{"type": "approve"}],
                headers={"Authorization": f"Bearer {bob}"},
            )
        link = run(app.state.links.login_link("alice"))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 820})
            page.goto(link)
            page.get_by_role("button", name="Continue as alice").click()
            page.wait_for_url("**/inbox")
            page.locator("#live[data-state=open]").wait_for()
            OUT.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(OUT / "inbox.png"), full_page=True)
            page.locator(".req.needs-me a").first.click()
            page.locator("form.approve").wait_for()
            page.screenshot(path=str(OUT / "request.png"), full_page=True)
            browser.close()
    print(f"wrote {OUT / 'inbox.png'} and {OUT / 'request.png'}")


if __name__ == "__main__":
    main()
