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
#: The widest a column's cell may be, in terminal cells: a long tool name, description or
#: agent name is cut with "…" (the detail shows it all), so it cannot push who decides, the
#: deadline and "needs you" off the screen.
WIDEST = {"tool": 24, "risk": 8, "description": 80, "rule": 28, "intent": 32}
WIDEST_DEFAULT = 40
#: The description keeps at least this much room on a narrow terminal.
DESCRIPTION_MIN = 16


def cell(value: object, style: str = "", width: int = WIDEST_DEFAULT) -> Text:
    text = Text(inert(str(value)), style=style, no_wrap=True, overflow="ellipsis")
    text.truncate(width, overflow="ellipsis")
    return text


def fit(cells: list[dict[str, Text]], width: int, padding: int = 1) -> None:
    """Cut the description cells (in place) so that every column fits in ``width`` terminal
    cells: the description is the column that gives way."""
    others = sum(
        max([Text(label).cell_len] + [c[key].cell_len for c in cells]) + 2 * padding
        for label, key in COLUMNS
        if key != "description"
    )
    room = max(DESCRIPTION_MIN, width - others - 2 * padding)
    for c in cells:
        c["description"].truncate(room, overflow="ellipsis")


def short(text: str, width: int) -> str:
    """``text`` made inert and cut to ``width`` cells with "…" (each side of "agent →
    principal" keeps its own room)."""
    cut = Text(inert(text))
    cut.truncate(width, overflow="ellipsis")
    return cut.plain


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
    return cell("judge: " + ", ".join(dict.fromkeys(verdicts)), "italic", WIDEST["intent"])


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
        "tool": cell(tools, "bold", WIDEST["tool"]),
        "risk": cell(risk, RISK_STYLE.get(risk, ""), WIDEST["risk"]),
        "description": cell(description, "", WIDEST["description"]),
        "who": cell(f"{short(req.agent or '-', 15)} → {short(req.principal.id, 14)}"),
        "rule": cell(
            ", ".join(dict.fromkeys(a.rule for a in req.action_requests)), "", WIDEST["rule"]
        ),
        "quorum": cell(menu.progress(req) or "-"),
        "intent": intent(req),
        "deadline": cell(countdown(req)),
        "you": you(needs),
    }
