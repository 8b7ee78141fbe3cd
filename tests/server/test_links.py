"""One-click links: GET/HEAD never decide, POST from our origin decides once."""

from __future__ import annotations

import re
import time

import httpx

from tests.server.conftest import Server


def token_of(url: str) -> str:
    match = re.search(r"[?&]t=([^&]+)", url)
    assert match
    return match.group(1)


def path_of(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[1].split("?")[0]


def link(server: Server, rid: str, approver: str = "bob", decision: str = "review") -> str:
    return str(server.run(server.links.decision_link(rid, approver, decision)))  # type: ignore[arg-type]


def post(server: Server, url: str, decision: str, **extra: str) -> httpx.Response:
    data = {"t": token_of(url), "decision": decision, **extra}
    return server.client().post("/" + path_of(url), data=data, headers={"Origin": server.url})


def status(server: Server, rid: str) -> str:
    return str(server.client("alice").get(f"/v1/requests/{rid}").json()["status"])


def test_get_and_head_show_a_confirmation_page_and_decide_nothing(server: Server) -> None:
    rid = server.pending()
    url = link(server, rid, decision="approve")
    client = server.client()
    head = client.head(url)
    page = client.get(url, headers={"User-Agent": "Slackbot-LinkExpanding 1.0"})
    again = client.get(url)
    assert head.status_code == 200 and page.status_code == 200 and again.status_code == 200
    assert "You are deciding as <strong>bob</strong>" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    assert "noindex" in page.headers["x-robots-tag"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert status(server, rid) == "pending"


def test_post_from_the_page_decides_as_the_links_approver(server: Server) -> None:
    rid = server.pending()
    url = link(server, rid, decision="approve")
    r = post(server, url, "approve")
    assert r.status_code == 200 and "Approved as bob" in r.text
    req = server.client("alice").get(f"/v1/requests/{rid}").json()
    assert req["status"] == "resolved"
    assert req["decisions"][0]["approver"] == "bob" and req["decisions"][0]["channel"] == "link"


def test_a_used_link_is_refused(server: Server) -> None:
    rid = server.pending()
    url = link(server, rid)
    assert post(server, url, "approve").status_code == 200
    assert post(server, url, "approve").status_code == 410
    assert server.client().get(url).status_code == 410


def test_an_expired_link_is_refused(server: Server) -> None:
    from signoff.server.links import link_url, store_link

    rid = server.pending()
    db = server.app.state.signoff.db
    raw = server.run(store_link(db, "review", "bob", time.time() - 1, rid))
    url = link_url(server.url, "review", raw, rid)
    assert server.client().get(url).status_code == 410
    assert post(server, url, "approve").status_code == 410
    assert status(server, rid) == "pending"


def test_a_forged_origin_is_refused(server: Server) -> None:
    rid = server.pending()
    url = link(server, rid)
    data = {"t": token_of(url), "decision": "approve"}
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        r = server.client().post("/" + path_of(url), data=data, headers=headers)
        assert r.status_code == 403, headers
    assert status(server, rid) == "pending"
    assert post(server, url, "approve").status_code == 200  # the link was not used up


def test_a_decision_link_does_only_its_decision(server: Server) -> None:
    rid = server.pending()
    url = link(server, rid, decision="approve")
    assert post(server, url, "reject", message="no").status_code == 410
    assert status(server, rid) == "pending"


def test_a_link_for_one_request_does_not_work_on_another(server: Server) -> None:
    a = server.pending()
    b = server.pending(call_id="call_2", thread="t-2")
    url = link(server, a)
    r = server.client().post(
        f"/a/{b}", data={"t": token_of(url), "decision": "approve"}, headers={"Origin": server.url}
    )
    assert r.status_code == 410
    assert status(server, b) == "pending"


def test_deciding_burns_the_approvers_other_links(server: Server) -> None:
    rid = server.pending()
    approve = link(server, rid, decision="approve")
    reject = link(server, rid, decision="reject")
    assert post(server, approve, "approve").status_code == 200
    assert post(server, reject, "reject", message="x").status_code == 410


def test_second_approvers_link_after_a_decision_says_already_decided(server: Server) -> None:
    rid = server.pending()
    bobs, carols = link(server, rid), link(server, rid, "carol")
    assert post(server, bobs, "approve").status_code == 200
    page = server.client().get(carols)
    assert "already resolved" in page.text
    assert post(server, carols, "reject", message="late").status_code == 409


def test_a_refused_decision_keeps_the_link_usable(server: Server) -> None:
    rid = server.pending(principal="erin")
    url = link(server, rid, "erin")  # erin may reject her own call but not approve it
    refused = post(server, url, "approve")
    assert refused.status_code == 403
    assert status(server, rid) == "pending"
    assert post(server, url, "reject", message="changed my mind").status_code == 200


def test_login_link_signs_in_once(server: Server) -> None:
    url = server.run(server.links.login_link("carol"))
    client = server.client()
    assert client.head(url).status_code == 200
    page = client.get(url)
    assert "Continue as carol" in page.text and page.headers["referrer-policy"] == "no-referrer"
    r = client.post("/login/link", data={"t": token_of(url)}, headers={"Origin": server.url})
    assert r.status_code == 303 and r.headers["location"] == "/inbox"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert client.get("/inbox").status_code == 200
    other = server.client()
    again = other.post("/login/link", data={"t": token_of(url)}, headers={"Origin": server.url})
    assert again.status_code == 410


def test_review_link_can_open_the_inbox(server: Server) -> None:
    rid = server.pending()
    url = link(server, rid)
    client = server.client()
    r = client.post(
        "/" + path_of(url),
        data={"t": token_of(url), "decision": "signin"},
        headers={"Origin": server.url},
    )
    assert r.status_code == 303 and r.headers["location"] == f"/requests/{rid}"
    assert "Approve" in client.get(f"/requests/{rid}").text
