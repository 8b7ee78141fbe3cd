"""The ``people:`` directory: who exists, which roles they hold, how to reach them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from signoff.policy.source import Loc, Problems

PERSON_KEYS = ("roles", "name", "slack", "discord", "email", "line")


@dataclass(frozen=True, slots=True)
class Person:
    """One person in the directory. ``roles`` decide what they may approve; the channel ids
    (``slack``, ``discord``, ``email``, ``line``) say where they are notified."""

    id: str
    roles: frozenset[str] = frozenset()
    name: str | None = None
    slack: str | None = None
    discord: str | None = None
    email: str | None = None
    line: str | None = None


def parse_people(data: object, loc: Loc, problems: Problems) -> dict[str, Person]:
    """``people:`` as ``{id: Person}``; malformed entries are reported and skipped."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        problems.add(loc, "people is a mapping of person id to {roles: [...], email: ...}")
        return {}
    people: dict[str, Person] = {}
    for pid, entry in data.items():
        person = _person(pid, entry, loc.key(pid), problems)
        if person is not None:
            people[person.id] = person
    return people


def _person(pid: object, entry: object, loc: Loc, problems: Problems) -> Person | None:
    if not isinstance(pid, str) or not pid:
        problems.add(loc, f"a person id is a non-empty string, got {pid!r}; quote it")
        return None
    if entry is None:
        return Person(pid)
    if not isinstance(entry, Mapping):
        problems.add(loc, "a person is a mapping like {roles: [finance], email: a@example.com}")
        return None
    unknown = sorted(str(k) for k in entry if k not in PERSON_KEYS)
    if unknown:
        problems.add(loc.key(unknown[0]), f"unknown key(s) {unknown}; allowed: {list(PERSON_KEYS)}")
        return None
    roles = entry.get("roles", [])
    if not isinstance(roles, list | tuple) or not all(isinstance(r, str) and r for r in roles):
        problems.add(
            loc.key("roles"), f"roles is a list of role names like [finance], got {roles!r}"
        )
        return None
    fields: dict[str, str | None] = {}
    ok = True
    for key in ("name", "slack", "discord", "email", "line"):
        value = entry.get(key)
        if key == "discord" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # Discord ids are numbers; YAML reads them as ints
        if value is not None and not isinstance(value, str):
            problems.add(loc.key(key), f"{key} is a string, got {value!r}; quote it")
            ok = False
        fields[key] = value
    if not ok:
        return None
    return Person(pid, frozenset(roles), **fields)
