"""What one row of the inbox shows, as literal text.

Every cell is a :class:`~rich.text.Text` built from :func:`~signoff.model.text.inert` text:
Textual reads a plain ``str`` cell as markup, so agent text like ``[bold]`` or ``[@click]``
would otherwise be interpreted.
"""

from __future__ import annotations

from rich.text import Text

from signoff.channels import menu
from signoff.model import ApprovalRequest, utcnow
from signoff.model.text import inert

COLUMNS = (
    ("tool", "tool"),
    ("risk", "risk"),
    ("description", "description"),
    ("agent → principal", "who"),
    ("rule", "rule"),
    ("quorum", "quorum"),
    ("intent", "intent"),
    ("deadline", "deadline"),
    ("you", "you"),
)
RISK_STYLE = {"low": "green", "medium": "yellow", "high": "red", "critical": "bold red"}


def cell(value: object, style: str = "") -> Text:
    return Text(inert(str(value)), style=style, no_wrap=True, overflow="ellipsis")


def countdown(req: ApprovalRequest) -> str:
    seconds = int((req.expires_at - utcnow()).total_seconds())
    if seconds <= 0:
        return "due"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def intent(req: ApprovalRequest) -> Text:
    verdicts = [str(a.intent.get("verdict")) for a in req.action_requests if a.intent]
    if not verdicts:
        return cell("-")
    return cell("judge: " + ", ".join(dict.fromkeys(verdicts)), "italic")


def you(needs: list[str] | None) -> Text:
    if needs is None:
        return cell("?", "dim")
    return cell("needs you", "bold yellow") if needs else cell("waiting for others", "dim")


def row(req: ApprovalRequest, needs: list[str] | None) -> dict[str, Text]:
    """The cells of one request, by column key."""
    first = req.action_requests[0]
    tools = ", ".join(dict.fromkeys(a.name for a in req.action_requests))
    risks = [a.risk for a in req.action_requests if a.risk]
    risk = risks[0] if risks else "-"
    description = (req.inquiry.question if req.inquiry else first.description) or "-"
    return {
        "tool": cell(tools, "bold"),
        "risk": cell(risk, RISK_STYLE.get(risk, "")),
        "description": cell(description),
        "who": cell(f"{req.agent or '-'} → {req.principal.id}"),
        "rule": cell(", ".join(dict.fromkeys(a.rule for a in req.action_requests))),
        "quorum": cell(menu.progress(req) or "-"),
        "intent": intent(req),
        "deadline": cell(countdown(req)),
        "you": you(needs),
    }
