"""When two names are the same person.

Principal ids and approver names are typed by people and agents, so ``Erin``, ``erin`` and
``ｅｒｉｎ`` (fullwidth) must be one person wherever it matters: self-approval, quorum
distinctness and directory lookups. Names are stored as written (they are what people read);
they are *compared* by :func:`person_key`, Unicode NFKC normalisation plus case folding.

The policy's ``people:`` directory adds aliases on top (``Policy.person_key``); everything in
:mod:`signoff.model` that compares people takes such a key function and defaults to
:func:`person_key`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache

PersonKey = Callable[[str], str]


@lru_cache(maxsize=4096)  # a few names recur on every decision (approver, principal)
def person_key(name: str) -> str:
    """The form two names are compared in: NFKC, case-folded (then NFKC again, because
    folding can leave a string unnormalised, e.g. ``ǰ`` folds to ``j`` + a combining caron)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def same_person(a: str | None, b: str | None, key: PersonKey = person_key) -> bool:
    """True when ``a`` and ``b`` name the same person (None is nobody, never a match)."""
    if a is None or b is None:
        return False
    return a == b or key(a) == key(b)


def contains_person(names: Iterable[str], name: str, key: PersonKey = person_key) -> bool:
    """True when one of ``names`` is the same person as ``name``."""
    if not names:  # an empty list (no approvals yet, no users): no key to work out
        return False
    wanted = key(name)
    return any(n == name or key(n) == wanted for n in names)
