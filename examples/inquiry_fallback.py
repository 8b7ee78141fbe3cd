"""A question nobody answers in time, answered by a judge instead — runnable on its own.

    python examples/inquiry_fallback.py

The policy names a `kind: python` judge (this file's `pick_region`; in real use an
OpenAI-compatible model, see docs/intent.md) and `inquiries: {fallback: {judge, after}}`. The
agent asks which region to deploy to; no human answers within `after` (1 s here), so the
gate's sweeper asks the judge, checks its answer against the choices like a human's, and
records it as answered by `judge:regions`. Had a human answered first, theirs would win.
"""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path
from typing import Any

from signoff import Gate, Policy
from signoff.model import ApprovalRequest

POLICY = """
version: 1
store: sqlite:///signoff.db
judges:
  regions:
    kind: python
    function: "__main__:pick_region"
    timeout: 5s
inquiries:
  fallback: {judge: regions, after: 1s}
"""


def pick_region(inquiry: Any, ctx: dict[str, Any]) -> str:
    """The judge: pick the choice the question's own wording prefers (a model would reason)."""
    choices = list(inquiry.choices or [])
    return "eu" if "eu" in choices and "GDPR" in inquiry.question else choices[0]


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="signoff-example-"))
    config = workdir / "signoff.yaml"
    config.write_text(textwrap.dedent(POLICY).lstrip())  # the store lands next to it
    with Gate(Policy.load(config)) as gate:
        asked = gate.ask(
            "Deploy the GDPR-scoped service to which region?",
            choices=["us", "eu"],
            timeout=60,
            wait=False,
        )
        assert isinstance(asked, ApprovalRequest)
        print(f"asked {asked.id}; nobody answers…")
        done = gate.wait(asked.id, timeout=30)
        call = done.calls[0]
        print(f"answer: {call.message!r}, by {call.resolved_by} (a model, not a human)")


if __name__ == "__main__":
    main()
