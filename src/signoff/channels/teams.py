"""Microsoft Teams: an Adaptive Card through a Workflows webhook, with an Open button.

Office 365 connectors ("Incoming Webhook" URLs) are retired; Teams now takes webhooks
through the **Workflows** app. **Provider side**: in the channel, Workflows → "Send
webhook alerts to a channel" (or the trigger "When a Teams webhook request is received"),
allowing anyone to trigger it; copy the URL. Its ``sig=`` makes it a secret:
``channels.teams: {workflow_url: ${TEAMS_WORKFLOW_URL}}``.

The channel is shared and Workflows cards cannot call back, so the card carries no
decision link: "Open" leads to the web page, where the approver signs in. A workflow post
cannot be edited either; the outcome goes out as a follow-up card.

Text an agent or an approver wrote goes into ``RichTextBlock`` text runs, which Adaptive
Cards never read as Markdown (a ``TextBlock`` would turn ``[label](url)`` into a link).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from signoff.channels import Outgoing, Target, message
from signoff.channels._http import request as http_request
from signoff.channels.config import TeamsConfig, missing_secrets
from signoff.channels.redact import cut
from signoff.model.text import inert

if TYPE_CHECKING:
    import httpx

    from signoff.policy.people import Person
    from signoff.store.base import OutboxKind


def plain(*runs: str | tuple[str, dict[str, str]]) -> dict[str, Any]:
    """A ``RichTextBlock`` of literal text runs (never Markdown); a run may carry a style."""
    inlines = [
        {"type": "TextRun", "text": run}
        if isinstance(run, str)
        else {"type": "TextRun", "text": run[0], **run[1]}
        for run in runs
    ]
    return {"type": "RichTextBlock", "inlines": inlines}


BOLD = {"weight": "Bolder"}


def card(out: Outgoing, *, resolved: bool = False) -> dict[str, Any]:
    """The message envelope with one Adaptive Card (1.4)."""
    req = out.request
    title = message.title(req, "prompt" if resolved else out.kind)
    body: list[dict[str, Any]] = [plain((title, {**BOLD, "size": "Medium"}))]
    if resolved:
        body.append(plain(message.outcome(req)))
    question = message.question(req)
    if question:
        body.append(plain(cut(question, 4000)))
    else:
        body += [plain(cut(line, 4000)) for line in message.call_lines(req, out.redact)]
    facts = [
        ("Agent", inert(req.agent or "—")),
        ("For", inert(req.principal.id)),
        ("Thread", inert(req.thread)),
        ("Expires", message.expires_in(req)),
        ("Request", req.id),
    ]
    body += [plain((f"{name}: ", BOLD), value) for name, value in facts]
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
