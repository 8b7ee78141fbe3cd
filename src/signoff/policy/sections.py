"""Every top-level section of ``signoff.yaml``, registered in one place.

The loader accepts exactly these keys. *Policy* sections are compiled by the loader itself;
*runtime* sections are kept as raw mappings in ``Policy.sections`` for the package that owns
them, which validates them (``signoff policy check`` runs every ``checker``; ``signoff serve``
and the gate run their own at start-up). Adding a section is one entry here, one row in the
table of docs/policy.md (a test keeps the two equal), and the owner's settings model.

A ``checker`` is named as ``"module:function"`` rather than imported, because the owners sit
above the policy layer and some need an optional extra (the server's needs ``signoff[server]``);
it is called as ``function(sections, filename=...)`` and raises :class:`PolicyError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    kind: Literal["policy", "runtime"]
    summary: str
    checker: str | None = None
    extra: str | None = None  # the optional extra the checker needs, if any


SECTIONS: tuple[Section, ...] = (
    Section("version", "policy", "The format version. Must be `1`."),
    Section("store", "policy", "Where approvals and the audit log are kept (a URL)."),
    Section(
        "defaults",
        "policy",
        "Review fields and decisions that apply when nothing more "
        "specific does; inherited by tools and rules.",
    ),
    Section("people", "policy", "The people who exist, their roles, and how to reach them."),
    Section("tools", "policy", "One entry per tool (or glob of tools): rules and review fields."),
    Section(
        "redact_keys",
        "policy",
        "Secret argument names (a list of case-insensitive regexes): masked on every surface, "
        "digested in audit events and in finished requests. `ui.redact_keys` is its old name.",
    ),
    Section(
        "limits",
        "runtime",
        "What an agent may send: nesting depth, argument size, calls per request, context "
        "text length.",
        checker="signoff.checks.limits:check_sections",
    ),
    Section(
        "grants",
        "runtime",
        "Standing approvals: `default_ttl`, `max_ttl`, `admin_roles` (who may create global "
        "and deny grants).",
        checker="signoff.gate.grants:check_sections",
    ),
    Section(
        "gate",
        "runtime",
        "Runtime settings of the gate (not policy): e.g. `sweep_interval`, `non_interactive`.",
        checker="signoff.gate.settings:check_sections",
    ),
    Section(
        "audit",
        "runtime",
        "Signed checkpoints of the audit log, written outside the database: `key`, `anchor`, "
        "`anchor_every`, `anchor_interval`, `signer`.",
        checker="signoff.audit.settings:check_sections",
    ),
    Section(
        "channels",
        "runtime",
        "Notification channels: Slack, Discord, e-mail, LINE, Telegram, Feishu/Lark, "
        "DingTalk, webhooks, Teams, console; delivery settings.",
        checker="signoff.channels.config:check_sections",
    ),
    Section(
        "serve",
        "runtime",
        "Where `signoff serve` listens and its public URL.",
        checker="signoff.server.settings:check_sections",
        extra="server",
    ),
    Section(
        "auth",
        "runtime",
        "How people and agents sign in to the server.",
        checker="signoff.server.settings:check_sections",
        extra="server",
    ),
    Section(
        "ui",
        "runtime",
        "The web inbox: redaction of secret-named arguments and display.",
        checker="signoff.server.settings:check_sections",
        extra="server",
    ),
    Section(
        "judges",
        "runtime",
        "Intent judges (a model or a function) that `intent:` on tools and rules names.",
        checker="signoff.judges.settings:check_sections",
    ),
    Section(
        "inquiries",
        "runtime",
        "Judges that stand in for humans on inquiries: `fallback` (`judge`, `after`: the "
        "judge answers when nobody did in time) and `suggest` (`judge`: pre-fills "
        "`default_answer`).",
        checker="signoff.gate.inquiry_settings:check_sections",
    ),
    Section(
        "mcp",
        "runtime",
        "`signoff mcp-proxy`: gating of resource reads and prompt gets by URI or name glob "
        "(`resources:`, `prompts:`; allow, deny or require_approval; default allow).",
        checker="signoff.integrations.mcp.gating:check_sections",
        extra="mcp",
    ),
    Section(
        "remote",
        "runtime",
        "Makes `Gate.from_config` return a remote gate talking to "
        "`signoff serve` (`url`, `token`).",
        checker="signoff.client.settings:check_sections",
        extra="client",
    ),
)

BY_NAME = {s.name: s for s in SECTIONS}
TOP_KEYS = tuple(s.name for s in SECTIONS if s.kind == "policy")
RUNTIME_SECTIONS = tuple(s.name for s in SECTIONS if s.kind == "runtime")
