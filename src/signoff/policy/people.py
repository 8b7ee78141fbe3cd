"""The ``people:`` directory: who exists, which roles they hold, how to reach them.

Names are looked up the way people are compared everywhere (:mod:`signoff.model.identity`):
after NFKC normalisation and case folding, and through each person's ``aliases:`` (the other
names they sign as). ``"Erin" in people`` is true for a person listed as ``erin``, and
``people["ERIN@corp"]`` is erin when that is one of her aliases. Iterating yields the ids as
written in the file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from signoff.model.identity import person_key
from signoff.policy.source import Loc, Problems

ADDRESS_KEYS = ("slack", "discord", "email", "line", "telegram", "feishu", "dingtalk")
PERSON_KEYS = ("roles", "name", *ADDRESS_KEYS, "aliases")
#: Addresses that are numbers on their platform, so YAML may read them as ints.
NUMERIC_KEYS = frozenset({"discord", "telegram", "dingtalk"})


@dataclass(frozen=True, slots=True)
class Person:
    """One person in the directory. ``roles`` decide what they may approve; the channel ids
    (``slack``, ``discord``, ``email``, ``line``, ``telegram``, ``feishu``, ``dingtalk``) say
    where they are notified; ``aliases``
    are other names they sign as (a Slack display name, ``ERIN@corp``)."""

    id: str
    roles: frozenset[str] = frozenset()
    name: str | None = None
    slack: str | None = None
    discord: str | None = None
    email: str | None = None
    line: str | None = None
    telegram: str | None = None
    feishu: str | None = None
    dingtalk: str | None = None
    aliases: tuple[str, ...] = ()


class People(Mapping[str, Person]):
    """The directory as a read-only mapping of person id to :class:`Person`, whose lookups
    (``in``, ``[]``, :meth:`find`) accept any spelling of an id or alias."""

    __slots__ = ("_by_id", "_by_key", "_keys", "roles")

    def __init__(self, people: Mapping[str, Person] | None = None) -> None:
        self._by_id: dict[str, Person] = dict(people or {})
        self._by_key: dict[str, Person] = {}
        for person in self._by_id.values():
            for name in (person.id, *person.aliases):
                self._by_key.setdefault(person_key(name), person)
        # each listed id and alias, as written, to its key (worked out once, at load): the
        # approver's and the principal's on every decision
        self._keys: dict[str, str] = {}
        self._keys = {
            name: self.key(name)
            for person in self._by_id.values()
            for name in (person.id, *person.aliases)
        }
        self.roles = RolesByName(self)

    def find(self, name: object) -> Person | None:
        """The person ``name`` (an id or alias, any case or width) refers to, if listed."""
        if not isinstance(name, str):
            return None
        found = self._by_id.get(name)
        if found is None and self._by_key:
            found = self._by_key.get(person_key(name))
        return found

    def key(self, name: str) -> str:
        """The comparison key of ``name``: the listed person's, for an id or alias of theirs
        (so every alias compares equal to the person), else ``person_key(name)``."""
        known = self._keys.get(name)
        if known is not None:
            return known
        found = self.find(name)
        return person_key(found.id if found is not None else name)

    def __getitem__(self, name: str) -> Person:
        found = self.find(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return self.find(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"People({self._by_id!r})"


class RolesByName(Mapping[str, frozenset[str]]):
    """``{name: roles}`` over a directory, for the ``principal.roles`` field of conditions:
    the exact id first (the common case, one dict lookup), then any other spelling."""

    __slots__ = ("_people",)

    def __init__(self, people: People) -> None:
        self._people = people

    def get(self, name: str, default: frozenset[str] | None = None) -> frozenset[str] | None:  # type: ignore[override]
        found = self._people.find(name)
        return found.roles if found is not None else default

    def __getitem__(self, name: str) -> frozenset[str]:
        return self._people[name].roles

    def __iter__(self) -> Iterator[str]:
        return iter(self._people)

    def __len__(self) -> int:
        return len(self._people)


def parse_people(data: object, loc: Loc, problems: Problems) -> People:
    """``people:`` as a :class:`People` directory; malformed entries are reported and skipped,
    and so are names (ids or aliases) that two people would share."""
    if data is None:
        return People()
    if not isinstance(data, Mapping):
        problems.add(loc, "people is a mapping of person id to {roles: [...], email: ...}")
        return People()
    people: dict[str, Person] = {}
    for pid, entry in data.items():
        person = _person(pid, entry, loc.key(pid), problems)
        if person is not None:
            people[person.id] = person
    return People(_without_clashes(people, loc, problems))


def _without_clashes(people: dict[str, Person], loc: Loc, problems: Problems) -> dict[str, Person]:
    """Each name must lead to one person: two ids that differ only in case or width, or a
    name that is both one person's alias and another's id or alias, is a load error
    (reported on the later entry)."""
    owner: dict[str, tuple[str, str]] = {}  # key -> (person id, "id" | "alias")
    kept: dict[str, Person] = {}
    for pid, person in people.items():
        clash = False
        seen = owner.get(person_key(pid))
        if seen is not None:
            problems.add(
                loc.key(pid),
                f"person {pid!r} is already {_as(seen)} (names compare ignoring case and "
                "width); list each person once, other names under aliases:",
            )
            clash = True
        for i, alias in enumerate(person.aliases):
            seen = owner.get(person_key(alias))
            if seen is not None and seen[0] != pid:
                problems.add(
                    loc.key(pid).key("aliases").item(i),
                    f"alias {alias!r} of {pid!r} is already {_as(seen)}; "
                    "a name can lead to one person only",
                )
                clash = True
        for name, kind in ((pid, "id"), *((a, "alias") for a in person.aliases)):
            owner.setdefault(person_key(name), (pid, kind))
        if not clash:
            kept[pid] = person
    return kept


def _as(seen: tuple[str, str]) -> str:
    pid, kind = seen
    return f"the person {pid!r}" if kind == "id" else f"an alias of {pid!r}"


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
    aliases = _aliases(entry.get("aliases", []), loc.key("aliases"), problems)
    if aliases is None:
        return None
    fields: dict[str, str | None] = {}
    ok = True
    for key in ("name", *ADDRESS_KEYS):
        value = entry.get(key)
        if key in NUMERIC_KEYS and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # Discord and Telegram ids are numbers; YAML reads them as ints
        if value is not None and not isinstance(value, str):
            problems.add(loc.key(key), f"{key} is a string, got {value!r}; quote it")
            ok = False
        fields[key] = value
    if not ok:
        return None
    return Person(pid, frozenset(roles), **fields, aliases=aliases)


def _aliases(value: object, loc: Loc, problems: Problems) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        problems.add(loc, f"aliases is a list of names like [ERIN@corp], got {value!r}")
        return None
    for i, alias in enumerate(value):
        if not isinstance(alias, str) or not alias.strip():
            problems.add(loc.item(i), f"an alias is a non-empty string, got {alias!r}; quote it")
            return None
    return tuple(value)
