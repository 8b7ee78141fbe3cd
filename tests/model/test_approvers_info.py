"""``approvers_info``: one ``ApproversInfo`` per distinct ``Approvers`` (built once per rule,
shared by the requests asking those approvers), copied by ``copy_for_update``; and
``ApproversInfo.admits``."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from signoff.model.requests import ApproversInfo, ReviewConfig, approvers_info
from signoff.model.verdicts import Approvers, ReviewSpec


def test_the_same_approvers_give_one_shared_info_equal_to_a_fresh_one() -> None:
    approvers = Approvers(roles=("dba",), quorum=2)
    assert approvers_info(approvers) is approvers_info(Approvers(roles=("dba",), quorum=2))
    assert approvers_info(approvers) == ApproversInfo.of(approvers)
    assert approvers_info(Approvers(roles=("ops",))) != approvers_info(approvers)


def test_review_configs_of_two_calls_share_it_and_a_copy_does_not() -> None:
    spec = ReviewSpec(approvers=Approvers(roles=("dba",)), escalate_to=Approvers(users=("cto",)))
    first = ReviewConfig.of("c1", "delete_record", spec)
    second = ReviewConfig.of("c2", "delete_record", spec)
    assert first.approvers is second.approvers
    assert first.escalate_to is second.escalate_to
    copied = first.model_copy(deep=True)
    assert copied.approvers == first.approvers and copied.approvers is not first.approvers


def test_approvers_holding_an_unhashable_value_get_their_own_info() -> None:
    odd = Approvers(roles=["dba"])  # type: ignore[arg-type]  # a list: not hashable
    info = approvers_info(odd)
    assert info.roles == ["dba"] and info is not approvers_info(odd)


# ApproversInfo.admits answers every decision without building an Approvers: the same answer
# as Approvers.admits, for plain groups and chains, any person, any roles
_NAMES = st.sampled_from(["alice", "Alice", "bob", "carol", "ops", "dba"])
_GROUP = st.builds(
    Approvers,
    roles=st.lists(_NAMES, max_size=3).map(tuple),
    users=st.lists(_NAMES, max_size=3).map(tuple),
    any=st.booleans(),
)
_APPROVERS = (
    _GROUP
    | st.builds(Approvers, stages=st.lists(_GROUP, min_size=1, max_size=3).map(tuple))
    | st.builds(Approvers, all_of=st.lists(_GROUP, min_size=1, max_size=3).map(tuple))
)


@given(_APPROVERS, _NAMES, st.frozensets(_NAMES, max_size=3))
def test_approvers_info_admits_whom_its_approvers_admit(
    approvers: Approvers, person: str, roles: frozenset[str]
) -> None:
    info = ApproversInfo.of(approvers)
    assert info.admits(person, roles) == approvers.admits(person, roles)
    assert info.admits(person, roles, str.lower) == approvers.admits(person, roles, str.lower)
