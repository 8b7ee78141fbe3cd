"""A guarded agent for the re-attach tests: ``python -m tests.gate.reattach_agent CONFIG OUT``.

Calls ``deploy(version="1.2")`` (needs one ops approval) as agent billing-bot for erin on
thread t-1, appends "ran 1.2" to OUT when the tool body runs, prints the result.
"""

from __future__ import annotations

import sys
from pathlib import Path

from signoff import Gate


def main() -> None:
    config, out = sys.argv[1], Path(sys.argv[2])
    gate = Gate.from_config(config)
    assert isinstance(gate, Gate)

    @gate.guard
    def deploy(version: str) -> str:
        with out.open("a") as f:
            f.write(f"ran {version}\n")
        return f"deployed {version}"

    with gate.context(principal="erin", agent="billing-bot", thread="t-1"):
        print(deploy("1.2"), flush=True)
    gate.close()


if __name__ == "__main__":
    main()
