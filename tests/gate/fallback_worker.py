"""A second process with its own gate (and sweeper) on a policy file, until stdin closes.

``python -m tests.gate.fallback_worker CONFIG`` prints ``ready`` once its gate runs."""

from __future__ import annotations

import sys

from signoff import Gate, Policy


def main(config: str) -> None:
    with Gate(Policy.load(config)):
        print("ready", flush=True)
        sys.stdin.read()  # until the test closes our stdin


if __name__ == "__main__":
    main(sys.argv[1])
