"""DingTalk: an interactive card from the app's robot, decided by a card callback.

ActionCard messages are not used: their buttons are plain links and never call back.

**Provider side**: an internal app (AppKey, AppSecret) with a robot (its ``robotCode``), the
card permissions, a card template built in DingTalk's card platform (its
``cardTemplateId``; the variables and buttons it must have are in docs/channels.md), and
the HTTP callback URL ``https://<your server>/hooks/dingtalk`` registered under a
``callbackRouteKey`` (``POST /v1.0/card/callbacks/register``). Config: ``channels.dingtalk:
{app_key, app_secret, robot_code, card_template_id, callback_route_key}``;
``people.<id>.dingtalk`` is the person's ``userId``.

**Out**: ``POST /v1.0/card/instances/createAndDeliver`` into the robot's chat with each
approver (``openSpaceId: dtv1.card//IM_ROBOT.<userId>``, forwarding off), ``outTrackId`` =
the outbox row id, under an ``accessToken`` (cached). Agent text in the ``body`` variable is
escaped for DingTalk markdown (``&<>`` as entities, every other ASCII punctuation
backslash-escaped); ``title``, ``context``, ``outcome`` and ``notice`` are plain text, for
the template's Text components (docs/channels.md). When the request resolves,
``PUT /v1.0/card/instances`` sets the outcome on every copy.

**In** (``POST /hooks/dingtalk``): the DingTalk documentation of HTTP card callbacks we
could consult gives no signature to verify (the ``apiSecret`` given at registration comes
with no documented algorithm), so signoff authenticates callbacks itself: each button's callback
parameters carry a token, HMAC-SHA256 under a key derived from the app secret over (card
``outTrackId``, recipient ``userId``, action, request id). A callback whose token does not
match the ``userId`` and ``outTrackId`` DingTalk reports is refused (401): nobody can forge
a click without a card sent to that person, and a token cannot be moved to another person,
card, action or request. Each (card, action) is accepted once per window; the gate's
first-valid-decision-wins makes any later replay a no-op.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from signoff.channels import DeliveryError, Inbound, Outgoing, Reply, Target, message
from signoff.channels._apptoken import CachedToken, token_in
from signoff.channels._http import request as http_request
from signoff.channels.config import DingTalkConfig, missing_secrets
from signoff.channels.inbound import ReplayGuard, decide_as, person_by
from signoff.channels.redact import cut

if TYPE_CHECKING:
    import httpx

    from signoff.channels.host import GateHandle
    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind

log = logging.getLogger("signoff.channels.dingtalk")

_MARKDOWN = str.maketrans(
    {
        **{c: "\\" + c for c in string.punctuation},
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
    }
)
ACTIONS = ("approve", "reject")
_NO_BUTTONS = {"can_approve": "false", "can_reject": "false"}


# ---------------------------------------------------------------- tokens
def token(app_secret: str, out_track_id: str, user_id: str, action: str, request_id: str) -> str:
    """The callback token of one button on one person's card."""
    key = hashlib.sha256(b"signoff dingtalk callback\0" + app_secret.encode()).digest()
    data = "\0".join((out_track_id, user_id, action, request_id)).encode()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def escape(text: str) -> str:
    """Text for DingTalk markdown that renders as itself."""
    return text.translate(_MARKDOWN)


def card_params(out: Outgoing, app_secret: str) -> dict[str, str]:
    """The template's variables (all strings, as DingTalk requires)."""
    req = out.request
    lines = [q for q in (message.question(req),) if q] + message.call_lines(req, out.redact)
    offer = message.choices(req)
    params = {
        "title": message.title(req, out.kind),
        "body": cut("\n\n".join(f"- {escape(line)}" for line in lines), 4000),
        "context": message.context_line(req),
        "status": "pending",
        "outcome": "",
        "request_id": req.id,
        "page_url": out.page_url or "",
        "can_approve": "true" if offer.approve else "false",
        "can_reject": "true" if offer.reject else "false",
    }
    for action in ACTIONS:
        params[f"{action}_token"] = token(app_secret, out.key, out.target.address, action, req.id)
    return params


def outcome_params(out: Outgoing) -> dict[str, str]:
    req = out.request
    lines = message.call_lines(req, out.redact)
    return {
        "title": message.title(req),
        "body": cut("\n\n".join(f"- {escape(line)}" for line in lines), 4000),
        "status": "resolved",
        "outcome": message.outcome(req),
        **_NO_BUTTONS,
    }


class DingTalkChannel:
    """DingTalk interactive cards; callbacks authenticated by our own per-card token."""

    name = "dingtalk"
    kinds = frozenset({"prompt", "reminder", "escalation", "update"})
    personal_links = False

    def __init__(self, config: DingTalkConfig) -> None:
        self.config = config
        self.replays = ReplayGuard()
        self.token = CachedToken(self._fetch_token)

    def ready(self) -> str | None:
        return missing_secrets(self.config, "channels.dingtalk")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        if kind == "event":
            return []
        return [Target(p.dingtalk, p.id) for p in people if p.dingtalk]

    # ------------------------------------------------------------ outbound
    async def _fetch_token(self, http: httpx.AsyncClient) -> tuple[str, float]:
        data = await self._api(
            http,
            "POST",
            "/v1.0/oauth2/accessToken",
            {"appKey": self.config.app_key, "appSecret": self.config.app_secret.value()},
            auth=False,
        )
        return token_in(data, "accessToken", "expireIn", "dingtalk")

    async def _api(
        self,
        http: httpx.AsyncClient,
        method: str,
        path: str,
        body: dict[str, Any],
        *,
        auth: bool = True,
    ) -> dict[str, Any]:
        """One new-style API call; errors are HTTP 4xx with ``{"code", "message"}``."""
        headers = {"x-acs-dingtalk-access-token": await self.token.get(http)} if auth else {}
        what = f"dingtalk {method} {path}"
        response = await http_request(
            http, method, f"{self.config.api_url}{path}", what=what, json=body,
            headers=headers, ok=frozenset({400, 401, 403}),
        )  # fmt: skip
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise DeliveryError(f"{what}: not a JSON object", retryable=True)
        if response.status_code >= 400:
            if response.status_code == 401:
                self.token.clear()
            code, text = data.get("code"), cut(str(data.get("message")), 200)
            raise DeliveryError(f"{what}: {code}: {text}", retryable=response.status_code == 401)
        return data

    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        user = out.target.address
        data = await self._api(
            http,
            "POST",
            "/v1.0/card/instances/createAndDeliver",
            {
                "cardTemplateId": self.config.card_template_id,
                "outTrackId": out.key,
                "callbackType": "HTTP",
                "callbackRouteKey": self.config.callback_route_key,
                "cardData": {"cardParamMap": card_params(out, self.config.app_secret.value())},
                "openSpaceId": f"dtv1.card//IM_ROBOT.{user}",
                "imRobotOpenSpaceModel": {"supportForward": False},
                "imRobotOpenDeliverModel": {
                    "spaceType": "IM_ROBOT",
                    "robotCode": self.config.robot_code,
                },
                "userIdType": 1,
            },
        )
        for result in (data.get("result") or {}).get("deliverResults") or []:
            if isinstance(result, dict) and result.get("success") is False:
                raise DeliveryError(
                    f"dingtalk deliver: {cut(str(result.get('errorMsg')), 200)}", retryable=False
                )
        return {"out_track_id": out.key}

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        await self._api(
            http,
            "PUT",
            "/v1.0/card/instances",
            {
                "outTrackId": ref.get("out_track_id"),
                "cardData": {"cardParamMap": outcome_params(out)},
                "cardUpdateOptions": {"updateCardDataByKey": True},
            },
        )

    # ------------------------------------------------------------ inbound
    async def receive(self, inbound: Inbound, gate: GateHandle) -> Reply:
        try:
            body = json.loads(inbound.body)
            value = body.get("value") or body.get("content") or "{}"
            params = json.loads(value)["cardPrivateData"]["params"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return Reply(400, {"error": "expected a card callback with cardPrivateData.params"})
        if not isinstance(params, dict):
            return Reply(400, {"error": "cardPrivateData.params: expected an object"})
        track, user = str(body.get("outTrackId") or ""), str(body.get("userId") or "")
        action, request_id = str(params.get("action") or ""), str(params.get("request_id") or "")
        expected = token(self.config.app_secret.value(), track, user, action, request_id)
        given = str(params.get("token") or "")
        if action not in ACTIONS or not hmac.compare_digest(expected.encode(), given.encode()):
            return Reply(401, {"error": "token: not a button of a card sent to this user"})
        if not self.replays.first_time(f"dingtalk:{track}:{action}", inbound.now):
            return Reply(409, _notice("This click was already processed."))
        person = person_by(gate, "dingtalk", user)
        if person is None:
            return Reply(200, _notice(_unknown(user)))
        result = await decide_as(
            gate, request_id, person, "approve" if action == "approve" else "reject",
            channel=self.name,
        )  # fmt: skip
        if not result.ok or result.request is None:
            return Reply(200, _notice(result.text))
        if result.request.pending:
            return Reply(200, _notice(result.text))
        shown = {"status": "resolved", "outcome": result.text}
        return Reply(200, {"cardData": {"cardParamMap": {**shown, **_NO_BUTTONS}}})


def _notice(text: str) -> dict[str, Any]:
    """A card update that shows ``text`` in the template's ``notice`` variable."""
    return {"cardData": {"cardParamMap": {"notice": cut(text, 500)}}}


def _unknown(user: str) -> str:
    return (
        f"Your DingTalk userId ({user}) is not linked to a signoff approver. Ask an admin to "
        f'add `dingtalk: "{user}"` to your entry in people: of signoff.yaml.'
    )


__all__ = ["DingTalkChannel", "card_params", "escape", "outcome_params", "token"]
