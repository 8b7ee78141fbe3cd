"""A sender process for the crash test: ``python -m tests.channels.crash_sender DB POLICY``.

Opens a gate on the SQLite file, submits one request (its webhook event is written to the
outbox with it), prints the request id and keeps running — its worker is then stuck in the
send (the receiver hangs) until the test kills it with SIGKILL.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from signoff import Gate, Policy
from signoff.model import ToolCall
from signoff.store import SQLiteStore


def main(db: str, policy_file: str) -> None:
    gate = Gate(Policy.load(Path(policy_file)), SQLiteStore(db))
    with gate.context("erin", thread="crash-thread", agent="bot"):
        sub = gate.submit([ToolCall("transfer_funds", {"amount": 50_000, "to": "ACME"})])
    assert sub.request is not None
    print(sub.request.id, flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
