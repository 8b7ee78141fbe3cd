"""Which channels hear about a request: the ``notify:`` lists of the rules that asked."""

from __future__ import annotations

from signoff.model import ApprovalRequest
from signoff.policy.review import CHANNELS


def notify_names(request: ApprovalRequest) -> frozenset[str] | None:
    """The channels a request's rules name in ``notify:``; None means every channel (some
    call's rule names none)."""
    lists = [cfg.notify for cfg in request.review_configs]
    if not lists or any(not names for names in lists):
        return None
    return frozenset(name for names in lists for name in names)


def wants(request: ApprovalRequest, channel: str) -> bool:
    """Whether ``channel`` should hear about ``request``. Channels the policy cannot name
    (``log``, a custom test channel) always do."""
    names = notify_names(request)
    return names is None or channel not in CHANNELS or channel in names
