"""Write docs/images/watch.svg: `signoff watch` over a few requests, exported by Textual.

Run from the repository root: `.venv/bin/python scripts/watch-screenshot.py`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.tui.conftest import POLICY, ask

from signoff import Gate, Policy
from signoff.cli.deciding import CliGate
from signoff.cli.watch_commands import detail_view
from signoff.tui import LocalSource, WatchApp

OUT = Path(__file__).resolve().parent.parent / "docs" / "images" / "watch.svg"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        Path("signoff.yaml").write_text(textwrap.dedent(POLICY))
        with Gate.from_config("signoff.yaml") as agent, CliGate(Policy.load("signoff.yaml")) as g:
            ask(agent, user_request="pay the ACME invoice")
            many = ask(agent, "pay_many", {"invoices": [41, 42, 43]}, principal="dave")
            agent.decide(many.id, [{"type": "approve"}], approver="carol", channel="web")
            ask(agent, "deploy", {"env": "prod"})
            chain = ask(agent, "pay_vendor", {"vendor": "ACME", "amount": 12_000})
            agent.decide(chain.id, [{"type": "approve"}], approver="mia", channel="web")
            app = WatchApp(LocalSource(g, "bob"), detail_view(g.policy))
            async with app.run_test(size=(186, 14)) as pilot:
                while app.table.row_count < 4:
                    await pilot.pause(0.05)
                await pilot.pause(0.2)
                app.save_screenshot(filename=OUT.name, path=str(OUT.parent))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
