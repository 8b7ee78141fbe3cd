"""``/v1/grants`` and approvals with a wider ``scope``: who may create and revoke, what the
answers look like, and that refusals name the field (issue: hardening II, grants)."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.server.wire import DecisionOut, GrantList, GrantOut
from tests.server.conftest import Server

DEPLOY = {"id": "d1", "name": "deploy", "args": {"version": "1.2"}}


def agent_grant(**changes: Any) -> dict[str, Any]:
    return {"tool": "deploy", "effect": "allow", "scope": "agent", "agent": "bot", **changes}


def create(server: Server, who: str, body: dict[str, Any]) -> Any:
    return server.client(who).post("/v1/grants", json=body)


def verdict_of(server: Server, call: dict[str, Any], **kw: Any) -> dict[str, Any]:
    r = server.submit([call], **kw)
    assert r.status_code in (200, 201), r.text
    return dict(r.json()["verdicts"][0])


def test_an_approver_creates_a_grant_that_approves_later_calls_at_once(server: Server) -> None:
    r = create(server, "dave", agent_grant(reason="release day", **{"for": "2h"}))
    assert r.status_code == 201, r.text
    grant = GrantOut.model_validate(r.json())
    assert grant.created_by == "dave" and grant.rule == "deploy.default" and grant.active
    assert grant.description == (
        "also approve `deploy` calls under rule deploy.default from bot until "
        + grant.expires_at.strftime("%Y-%m-%d %H:%M UTC")
    )
    assert (grant.expires_at - grant.created_at).total_seconds() == 7200
    verdict = verdict_of(server, DEPLOY)
    assert verdict["verdict"] == "allow" and verdict["grant"] == grant.id
    # another agent is not covered
    assert verdict_of(server, {**DEPLOY, "id": "d2"}, who="other-bot")["verdict"] == (
        "require_approval"
    )


def test_the_creator_is_the_token_never_a_name_in_the_body(server: Server) -> None:
    r = create(server, "dave", agent_grant(created_by="alice"))
    assert r.status_code == 422 and r.json()["field"] == "created_by"


def test_list_and_the_active_filter(server: Server) -> None:
    first = create(server, "dave", agent_grant()).json()
    create(server, "dave", agent_grant(agent="other-bot"))
    server.client("dave").request("DELETE", f"/v1/grants/{first['id']}")
    everything = GrantList.model_validate(server.client("bob").get("/v1/grants").json())
    active = server.client("bob").get("/v1/grants", params={"active": "true"}).json()
    assert len(everything.grants) == 2
    assert [g["agent"] for g in active["grants"]] == ["other-bot"]
    bad = server.client("bob").get("/v1/grants", params={"active": "maybe"})
    assert bad.status_code == 422 and bad.json()["field"] == "active"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/grants"), ("POST", "/v1/grants"), ("DELETE", "/v1/grants/grant_x")],
)
def test_agent_tokens_may_not_touch_grants(server: Server, method: str, path: str) -> None:
    body = agent_grant() if method == "POST" else None
    r = server.client("bot").request(method, path, json=body)
    assert r.status_code == 403


def test_only_someone_who_could_approve_alone_may_grant(server: Server) -> None:
    r = create(server, "bob", agent_grant())  # finance, deploy needs ops
    assert r.status_code == 403 and r.json()["field"] == "created_by"
    assert server.client("dave").get("/v1/grants").json()["grants"] == []


def test_a_quorum_rule_cannot_be_granted(server: Server) -> None:
    r = create(server, "bob", {**agent_grant(), "tool": "pay_many"})
    assert r.status_code == 422 and r.json()["field"] == "rule"
    assert "quorum" in r.json()["message"]


@pytest.mark.parametrize(
    "body",
    [
        agent_grant(scope="global", agent=None),
        agent_grant(effect="deny"),
    ],
)
def test_global_and_deny_grants_need_a_grants_admin(server: Server, body: dict[str, Any]) -> None:
    body = {k: v for k, v in body.items() if v is not None}
    assert create(server, "dave", body).status_code == 403
    assert create(server, "alice", body).status_code == 201  # alice holds admin


def test_a_deny_grant_rejects_at_once(server: Server) -> None:
    r = create(server, "alice", agent_grant(effect="deny", reason="frozen"))
    assert r.status_code == 201
    verdict = verdict_of(server, DEPLOY)
    assert verdict["verdict"] == "deny" and verdict["grant"] == r.json()["id"]
    assert "frozen" in verdict["reason"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"scope": "thread"}, "thread"),
        ({"scope": "principal", "agent": None}, "principal"),
        ({"for": "forever"}, "for"),
        ({"for": "400d"}, "for"),
        ({"when": {"args.version": {"bogus_op": 1}}}, "when"),
        ({"when": {"rate": {"max": 1, "per": "1m"}}}, "when"),
        ({"effect": "maybe"}, "effect"),
        ({"scope": "everyone"}, "scope"),
        ({"tool": "get_price"}, "rule"),  # allowed by the policy: a grant would never apply
        ({"color": "red"}, "color"),
    ],
)
def test_a_bad_field_is_a_422_naming_it(
    server: Server, changes: dict[str, Any], field: str
) -> None:
    body = {k: v for k, v in agent_grant(**changes).items() if v is not None}
    r = create(server, "dave", body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


def test_the_rule_is_told_from_the_when_literals_or_must_be_named(server: Server) -> None:
    body = {"tool": "transfer_funds", "effect": "allow", "scope": "principal", "principal": "frank"}
    unknown = create(server, "bob", body)
    assert unknown.status_code == 422 and unknown.json()["field"] == "rule"
    assert "args.amount" in unknown.json()["message"]
    told = create(server, "bob", {**body, "when": {"args.amount": 50_000}})
    assert told.status_code == 201 and told.json()["rule"] == "large-transfer"
    named = create(server, "bob", {**body, "rule": "large-transfer"})
    assert named.status_code == 201 and named.json()["when"] is None


def test_revoke_by_creator_or_admin_only(server: Server) -> None:
    grant = create(server, "dave", agent_grant()).json()
    assert verdict_of(server, DEPLOY)["verdict"] == "allow"
    other = server.client("bob").request("DELETE", f"/v1/grants/{grant['id']}")
    assert other.status_code == 403
    r = server.client("alice").request(
        "DELETE", f"/v1/grants/{grant['id']}", json={"reason": "incident"}
    )
    assert r.status_code == 200, r.text
    revoked = GrantOut.model_validate(r.json())
    assert revoked.revoked_by == "alice" and revoked.revoke_reason == "incident"
    assert not revoked.active
    assert verdict_of(server, {**DEPLOY, "id": "d9"})["verdict"] == "require_approval"


def test_revoking_an_unknown_grant_is_a_404(server: Server) -> None:
    r = server.client("alice").request("DELETE", "/v1/grants/grant_nope")
    assert r.status_code == 404 and r.json()["error"] == "not_found"


def test_an_approve_with_scope_thread_names_the_grant_it_created(server: Server) -> None:
    rid = server.submit([DEPLOY], thread="t-7").json()["id"]
    r = server.client("dave").post(
        f"/v1/requests/{rid}/decisions",
        json={"decisions": [{"type": "approve", "scope": "thread"}]},
    )
    assert r.status_code == 200, r.text
    body = DecisionOut.model_validate(r.json())
    [grant] = body.grants
    assert grant.scope == "thread" and grant.thread == "t-7" and grant.agent == "bot"
    assert grant.principal == "frank" and grant.source_request == rid
    assert body.decisions[-1].grant_id == grant.id
    assert grant.description.startswith(
        "also approve `deploy` calls under rule deploy.default from bot for frank on thread t-7"
    )
    assert verdict_of(server, {**DEPLOY, "id": "d2"}, thread="t-7")["verdict"] == "allow"
    assert verdict_of(server, {**DEPLOY, "id": "d3"}, thread="t-8")["verdict"] != "allow"


def test_an_approve_with_a_scope_object_sets_kind_lifetime_and_conditions(server: Server) -> None:
    rid = server.submit([DEPLOY]).json()["id"]
    scope = {"kind": "agent", "for": "30m", "when": {"args.version": {"starts_with": "1."}}}
    r = server.client("dave").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve", "scope": scope}]}
    )
    assert r.status_code == 200, r.text
    [grant] = r.json()["grants"]
    assert grant["scope"] == "agent" and grant["when"] == scope["when"]
    assert verdict_of(server, {**DEPLOY, "id": "d2", "args": {"version": "1.9"}})["verdict"] == (
        "allow"
    )
    assert verdict_of(server, {**DEPLOY, "id": "d3", "args": {"version": "2.0"}})["verdict"] == (
        "require_approval"
    )


def test_a_plain_approve_creates_no_grant(server: Server) -> None:
    rid = server.submit([DEPLOY]).json()["id"]
    r = server.client("dave").post(
        f"/v1/requests/{rid}/decisions", json={"decisions": [{"type": "approve"}]}
    )
    assert r.status_code == 200 and r.json()["grants"] == []


def test_a_scope_on_a_quorum_call_is_refused_naming_the_field(server: Server) -> None:
    rid = server.submit([{"id": "p1", "name": "pay_many", "args": {}}]).json()["id"]
    r = server.client("bob").post(
        f"/v1/requests/{rid}/decisions",
        json={"decisions": [{"type": "approve", "scope": {"kind": "agent"}}]},
    )
    assert r.status_code == 422 and r.json()["field"] == "decisions[0].scope"
    assert server.client("bob").get(f"/v1/requests/{rid}").json()["status"] == "pending"


def test_a_browser_delete_needs_the_csrf_header(server: Server) -> None:
    from tests.server.test_inbox_forms import sign_in

    grant = create(server, "dave", agent_grant()).json()
    browser = sign_in(server, "dave")
    r = browser.request("DELETE", f"/v1/grants/{grant['id']}", headers={"Origin": server.url})
    assert r.status_code == 403 and r.json()["error"] == "csrf_failed"
    assert server.client("dave").get("/v1/grants?active=true").json()["grants"]
