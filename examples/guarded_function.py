"""Guard plain Python functions with signoff — runnable on its own.

    python examples/guarded_function.py

An "agent" (the main thread) calls three tools; the policy in examples/signoff.yaml allows
one, denies one, and sends one to two finance approvers. Two approver threads stand in for
people deciding from another terminal (`signoff approve …`). Everything is stored in a
temporary SQLite file and audited.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

from signoff import Denied, Gate, Rejected

HERE = Path(__file__).parent


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="signoff-example-"))
    shutil.copy(HERE / "signoff.yaml", workdir / "signoff.yaml")  # store lands next to it
    gate = Gate.from_config(workdir / "signoff.yaml")

    @gate.guard
    def get_stock_price(symbol: str) -> float:
        return 412.5

    @gate.guard
    def delete_record(table: str, record_id: int, environment: str) -> str:
        return f"deleted {table} #{record_id}"

    @gate.guard
    def transfer_funds(amount: int, to: str, currency: str = "EUR") -> str:
        return f"sent {amount} {currency} to {to}"

    def approver(name: str) -> None:
        """Stand-in for a person: approve the first transfer waiting for them."""
        while True:
            for req in gate._portal.run(gate.alist(status="pending")):
                call = req.calls[0]
                if name not in call.approvals:
                    print(f"  {name} approves {req.action_requests[0].description}")
                    gate.decide(req.id, [{"type": "approve"}], approver=name)
                    return
            threading.Event().wait(0.05)

    with gate.context(
        principal="erin",
        thread="example",
        agent="finance-bot",
        user_request="pay the ACME invoice",
        reasoning="invoice #42 is due",
    ):
        print("price:", get_stock_price(symbol="MSFT"))
        try:
            delete_record(table="users", record_id=1, environment="production")
        except Denied as exc:
            print("denied:", exc)
        approvers = [threading.Thread(target=approver, args=(n,)) for n in ("bob", "carol")]
        for t in approvers:
            t.start()
        try:
            print(transfer_funds(amount=50_000, to="ACME"))
        except Rejected as exc:
            print("rejected:", exc)
        for t in approvers:
            t.join()
    result = gate._portal.run(gate.store.verify_audit())
    print(f"audit log: {'intact' if result.ok else 'BROKEN'} ({result.checked} rows)")
    gate.close()
    shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
