"""Microsoft Teams: an Adaptive Card through a Workflows webhook, with an Open button.

Office 365 connectors ("Incoming Webhook" URLs) are retired; Teams now takes webhooks
through the **Workflows** app. **Provider side**: in the channel, Workflows → "Send
webhook alerts to a channel" (or the trigger "When a Teams webhook request is received"),
allowing anyone to trigger it; copy the URL. Its ``sig=`` makes it a secret:
``channels.teams: {workflow_url: ${TEAMS_WORKFLOW_URL}}``.

The channel is shared and Workflows cards cannot call back, so the card carries no
decision link: "Open" leads to the web page, where the approver signs in. A workflow post
cannot be edited either; the outcome goes out as a follow-up card.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from signoff.channels import Outgoing, Target, message
from signoff.channels._http import request as http_request
from signoff.channels.config import TeamsConfig, missing_secrets
from signoff.channels.redact import cut

if TYPE_CHECKING:
    import httpx

    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind


def card(out: Outgoing, *, resolved: bool = False) -> dict[str, Any]:
    """The message envelope with one Adaptive Card (1.4)."""
    req = out.request
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": message.title(req, "prompt" if resolved else out.kind),
            "weight": "Bolder",
            "size": "Medium",
            "wrap": True,
        }
    ]
    if resolved:
        body.append({"type": "TextBlock", "text": message.outcome(req), "wrap": True})
    text = message.question(req) or "\n\n".join(message.call_lines(req, out.redact))
    if text:
        body.append({"type": "TextBlock", "text": cut(text, 4000), "wrap": True})
    facts = [
        {"title": "Agent", "value": req.agent or "—"},
        {"title": "For", "value": req.principal.id},
        {"title": "Thread", "value": req.thread},
        {"title": "Expires", "value": message.expires_in(req)},
        {"title": "Request", "value": req.id},
    ]
    body.append({"type": "FactSet", "facts": facts})
    actions = []
    if out.page_url:
        title = "Open" if resolved else "Review & decide"
        actions.append({"type": "Action.OpenUrl", "title": title, "url": out.page_url})
    elif not resolved:
        body.append({"type": "TextBlock", "text": message.cli_hint(req), "wrap": True})
    content: dict[str, Any] = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }
    if actions:
        content["actions"] = actions
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": content,
            }
        ],
    }


class TeamsChannel:
    """One card per request in a Teams channel, and a follow-up card with the outcome."""

    name = "teams"
    kinds = frozenset({"prompt", "reminder", "escalation", "update"})
    personal_links = False

    def __init__(self, config: TeamsConfig) -> None:
        self.config = config

    def ready(self) -> str | None:
        return missing_secrets(self.config, "channels.teams")

    def targets(
        self, people: Sequence[Person], kind: OutboxKind, event: str | None = None
    ) -> list[Target]:
        return [] if kind == "event" else [Target("teams")]

    async def send(self, out: Outgoing, http: httpx.AsyncClient) -> dict[str, Any] | None:
        await self._post(http, card(out))
        return {"posted": True}

    async def update(self, out: Outgoing, ref: dict[str, Any], http: httpx.AsyncClient) -> None:
        await self._post(http, card(out, resolved=True))

    async def _post(self, http: httpx.AsyncClient, body: dict[str, Any]) -> None:
        await http_request(
            http, "POST", self.config.workflow_url.value(), what="teams workflow", json=body
        )
