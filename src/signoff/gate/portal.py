"""The gate's private event loop (see :mod:`signoff._loopthread`).

The allow/deny hot path never touches it: only approvals (which wait for humans anyway),
the sweeper, and sync wrappers of async primitives run here.
"""

from __future__ import annotations

from signoff._loopthread import LoopThread


class Portal(LoopThread):
    def __init__(self, name: str = "signoff-gate") -> None:
        super().__init__(name)


__all__ = ["Portal"]
