"""The directory's keys worked out at load answer exactly what the lookup answers."""

from __future__ import annotations

from signoff.model.identity import person_key
from signoff.policy.people import People, Person


def _lookup_key(people: People, name: str) -> str:
    """People.key without the table made at load: find the person, key their id."""
    found = people.find(name)
    return person_key(found.id if found is not None else name)


def test_key_of_every_listed_name_is_the_lookups() -> None:
    people = People(
        {
            "alice": Person(id="alice", aliases=("Alice@corp", "ＡＬＩＣＥ")),
            "Bob": Person(id="Bob", aliases=("bobby",)),
            # an alias whose key is another person's id: the first listed person keeps it
            "carol": Person(id="carol", aliases=("BOB",)),
        }
    )
    names = ["alice", "Alice@corp", "ＡＬＩＣＥ", "Bob", "bobby", "carol", "BOB", "ALICE", "dave"]
    for name in names:
        assert people.key(name) == _lookup_key(people, name), name
    assert people.key("BOB") == people.key("Bob") == people.key("bobby")
    assert people.key("ＡＬＩＣＥ") == people.key("alice")
