"""Worker process for the cross-process resume benchmark: what ``signoff approve`` does, kept alive.

Run as ``python -m benchmarks._decider CONFIG``. It opens its own :class:`Gate` on the config's
SQLite file, prints ``{"ready": true}``, then for each line ``{"id": REQUEST_ID}`` on stdin
approves that request as :data:`benchmarks.fixtures.APPROVER` and answers one JSON line
``{"t0_ns", "t1_ns", "ok", "error"}``: ``time.monotonic_ns()`` (CLOCK_MONOTONIC, one clock for
every process on Linux) just before and after the decide call. Staying alive keeps Python
start-up out of the measured wake-up latency; the CLI's own wall time is measured separately.
"""

from __future__ import annotations

import json
import sys
import time

from benchmarks.fixtures import APPROVER
from signoff import Gate, Policy


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m benchmarks._decider CONFIG", file=sys.stderr)
        return 2
    with Gate(Policy.load(argv[1])) as gate:  # the store named by the config, like the CLI
        gate.start()
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            request_id = json.loads(line)["id"]
            error = None
            t0 = time.monotonic_ns()
            try:
                gate.decide(request_id, [{"type": "approve"}], approver=APPROVER, channel="cli")
            except Exception as exc:  # report it to the benchmark, which fails loudly
                error = f"{type(exc).__name__}: {exc}"
            t1 = time.monotonic_ns()
            reply = {"t0_ns": t0, "t1_ns": t1, "ok": error is None, "error": error}
            print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
