"""The ``people:`` directory compares names after NFKC + casefold and through ``aliases:``."""

from __future__ import annotations

from signoff.model import Principal
from signoff.policy import People, Person, Policy
from tests.policy.helpers import call, ctx, load, load_error, messages

DIRECTORY = """
people:
  erin:  {roles: [finance], aliases: [ERIN@corp, "Erin W."]}
  Bob:   {roles: [finance]}
  alice: {roles: [admin]}
"""


def directory() -> Policy:
    return load(DIRECTORY)


def test_aliases_are_kept_on_the_person() -> None:
    erin = directory().people["erin"]
    assert erin == Person("erin", frozenset({"finance"}), aliases=("ERIN@corp", "Erin W."))


def test_ids_are_listed_as_written() -> None:
    assert list(directory().people) == ["erin", "Bob", "alice"]
    assert len(directory().people) == 3


def test_lookups_ignore_case_and_width() -> None:
    people = directory().people
    assert "ERIN" in people and "ｅｒｉｎ" in people and "bob" in people
    assert people["bob"].id == "Bob"
    assert "mallory" not in people
    assert 42 not in people  # type: ignore[comparison-overlap]


def test_aliases_lead_to_the_person() -> None:
    people = directory().people
    assert people["erin@corp"].id == "erin"
    assert people.find("erin w.") is people["erin"]
    assert people.find("erin.w") is None


def test_roles_of_any_spelling_or_alias() -> None:
    policy = directory()
    assert policy.roles_of("ERIN@CORP") == frozenset({"finance"})
    assert policy.roles_of("BOB") == frozenset({"finance"})
    assert policy.roles_of("mallory") == frozenset()


def test_principal_keeps_the_id_as_written_and_takes_directory_roles() -> None:
    policy = directory()
    assert policy.principal("ERIN@corp", ["admin"]) == Principal(
        "ERIN@corp", frozenset({"finance"})
    )
    assert policy.principal("Mallory", ["admin"]) == Principal("Mallory", frozenset({"admin"}))


def test_knows_and_person_key() -> None:
    policy = directory()
    assert policy.knows("Erin W.") and policy.knows("ALICE")
    assert not policy.knows("mallory")
    assert policy.person_key("ERIN@corp") == policy.person_key("erin") == "erin"
    assert policy.person_key("Mallory") == "mallory"
    assert policy.same_person("Erin W.", "ERIN@corp")
    assert not policy.same_person("erin", "Bob")


def test_directory_roles_win_in_conditions_for_another_spelling() -> None:
    policy = load(
        DIRECTORY
        + """
tools:
  t:
    default: allow
    rules:
      - id: admins-only
        when: {not: {principal.roles: {contains: admin}}}
        decision: deny
        reason: x
"""
    )
    # "ERIN@corp" is erin (finance): claiming admin in code does not help.
    assert policy.evaluate(call("t"), ctx("ERIN@corp", ("admin",))).kind == "deny"
    assert policy.evaluate(call("t"), ctx("ALICE")).kind == "allow"


def test_quorum_warning_counts_people_not_spellings() -> None:
    policy = load(
        DIRECTORY
        + """
tools:
  t:
    default: require_approval
    approvers: {users: [bob, Bob], quorum: 2}
"""
    )
    assert any("quorum 2 but only 1 person(s) can approve" in w for w in policy.warnings)


def test_an_alias_that_is_another_persons_id_is_a_load_error_with_its_line() -> None:
    err = load_error(
        """
        version: 1
        people:
          erin: {roles: [finance]}
          bob:  {roles: [finance], aliases: [bobby, Erin]}
        """
    )
    assert err.path == "signoff.yaml.people.bob.aliases[1]"
    assert err.line == 4
    assert "already the person 'erin'" in str(err)


def test_an_alias_claimed_twice_is_a_load_error() -> None:
    err = load_error(
        """
        version: 1
        people:
          erin: {aliases: [ops-oncall]}
          bob:
            aliases:
              - OPS-ONCALL
        """
    )
    assert err.path == "signoff.yaml.people.bob.aliases[0]"
    assert err.line == 6
    assert "already an alias of 'erin'" in str(err)


def test_a_person_listed_in_two_spellings_is_a_load_error() -> None:
    err = load_error(
        """
        version: 1
        people:
          erin: {}
          Erin: {}
        """
    )
    assert err.path == "signoff.yaml.people.Erin"
    assert err.line == 4
    assert "under aliases" in str(err)


def test_an_id_that_is_an_earlier_alias_is_a_load_error() -> None:
    err = load_error(
        """
        version: 1
        people:
          erin: {aliases: [boss]}
          Boss: {}
        """
    )
    assert err.path == "signoff.yaml.people.Boss"
    assert "already an alias of 'erin'" in str(err)


def test_a_persons_own_id_as_alias_is_harmless() -> None:
    assert load("people:\n  erin: {aliases: [ERIN]}\n").people["erin"].aliases == ("ERIN",)


def test_malformed_aliases_are_load_errors() -> None:
    err = load_error("version: 1\npeople:\n  erin: {aliases: ERIN}\n")
    assert err.path == "signoff.yaml.people.erin.aliases"
    assert "list of names" in str(err)
    err = load_error("version: 1\npeople:\n  erin: {aliases: [ok, 7]}\n")
    assert err.path == "signoff.yaml.people.erin.aliases[1]"
    assert "quote it" in str(err)


def test_every_clash_is_reported_in_one_load() -> None:
    err = load_error(
        """
        version: 1
        people:
          a: {aliases: [x]}
          b: {aliases: [X]}
          A: {}
        """
    )
    assert len(messages(err)) == 2


def test_an_empty_directory_knows_nobody() -> None:
    people = People()
    assert "anyone" not in people and len(people) == 0
    assert people.key("Erin") == "erin"
    assert load("tools: {}\n").knows("erin") is False
