"""The ``channels:`` section of ``signoff.yaml``, validated, with secrets by reference only.

Every key is checked at load; a mistake raises :class:`PolicyError` naming the key
(``channels.slack.bot_token``). Secrets (tokens, signing secrets, passwords, webhook URLs
that embed a token) must be written ``${ENV_VAR}``: an inline value is refused, because a
config file is copied, committed and pasted into tickets. The variable is read when a
message is sent or a callback verified, so processes that never send (the CLI deciding a
request) need not hold the secrets; ``signoff serve`` checks them all at start-up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from signoff.model import PolicyError
from signoff.policy.settings import Duration, HttpUrl

if TYPE_CHECKING:
    pass

M = TypeVar("M", bound=BaseModel)
_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")

WebhookEvent = Literal[
    "created",
    "decided",
    "expired",
    "cancelled",
    "escalated",
    "edit_rerouted",
    "stage_started",
    "grant_created",
    "grant_revoked",
    "grant_expired",
    "reattached",
    "reconciled",
]
WEBHOOK_EVENTS: tuple[WebhookEvent, ...] = get_args(WebhookEvent)


@dataclass(frozen=True, slots=True)
class Secret:
    """A ``${NAME}`` reference; the value is read from the environment when used."""

    env: str
    path: str = ""

    def available(self) -> bool:
        return bool(os.environ.get(self.env))

    def value(self) -> str:
        found = os.environ.get(self.env)
        if not found:
            raise PolicyError(
                f"environment variable {self.env} is not set (referenced as ${{{self.env}}})",
                path=self.path,
            )
        return found

    def __repr__(self) -> str:  # never the value
        return f"Secret(${{{self.env}}})"


def _secret(value: object) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str) or not _REF.match(value.strip()):
        raise ValueError(
            "secrets are written as a ${ENV_VAR} reference, never inline; "
            "put the value in an environment variable and write e.g. ${SLACK_BOT_TOKEN}"
        )
    match = _REF.match(value.strip())
    assert match is not None
    return Secret(match.group(1))


def _id(value: object) -> object:
    # Discord and Slack ids are long numbers; YAML reads unquoted ones as ints.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


SecretRef = Annotated[Secret, BeforeValidator(_secret)]
Id = Annotated[str, BeforeValidator(_id)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class SlackConfig(_Section):
    """A Slack app: bot token (``chat:write``, ``im:write``), signing secret, API base."""

    bot_token: SecretRef
    signing_secret: SecretRef
    api_url: HttpUrl = "https://slack.com/api"
    channel: Id | None = None  # post once into this channel instead of a DM per person


class DiscordConfig(_Section):
    """A Discord app with a bot (buttons) or a plain channel webhook (link buttons)."""

    bot_token: SecretRef | None = None
    application_id: Id | None = None
    public_key: str | None = None
    channel_id: Id | None = None
    api_url: HttpUrl = "https://discord.com/api/v10"
    webhook_url: SecretRef | None = None

    @field_validator("public_key")
    @classmethod
    def _hex_key(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", value):
            raise ValueError("public_key is the application's 64-hex-digit Ed25519 public key")
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> DiscordConfig:
        bot = (self.bot_token, self.application_id, self.public_key)
        if self.webhook_url is not None:
            if any(v is not None for v in (*bot, self.channel_id)):
                raise ValueError(
                    "choose one mode: {webhook_url} (link buttons) or "
                    "{bot_token, application_id, public_key, channel_id} (real buttons)"
                )
            return self
        if any(v is None for v in bot):
            raise ValueError(
                "a Discord app needs bot_token, application_id and public_key "
                "(or use a plain channel webhook: {webhook_url: ${DISCORD_WEBHOOK_URL}})"
            )
        return self


class EmailConfig(_Section):
    """SMTP submission: STARTTLS on 587 by default (or ``ssl: true`` on 465), with login."""

    model_config = ConfigDict(populate_by_name=True)

    host: str
    port: int = Field(default=587, ge=1, le=65535)
    username: str | None = None
    password: SecretRef | None = None
    sender: str = Field(alias="from")
    starttls: bool = True
    ssl: bool = False
    ca_file: str | None = None  # a CA bundle for a private relay's certificate
    timeout: Duration = 20.0

    @model_validator(mode="after")
    def _tls(self) -> EmailConfig:
        if (self.username is None) != (self.password is None):
            raise ValueError("give both username and password, or neither")
        if self.ssl and self.starttls:
            raise ValueError("choose ssl: true (port 465) or starttls: true (port 587), not both")
        if self.password is not None and not (self.ssl or self.starttls):
            raise ValueError("refusing to send a password without TLS: set starttls: true")
        if "@" not in self.sender:
            raise ValueError("from is an email address, like 'signoff <signoff@example.com>'")
        return self


class LineConfig(_Section):
    """A LINE Messaging API channel (LINE Notify was shut down on 2025-03-31)."""

    channel_access_token: SecretRef
    channel_secret: SecretRef
    api_url: HttpUrl = "https://api.line.me"


class TelegramConfig(_Section):
    """A Telegram bot: its token (from @BotFather) and the webhook's secret token."""

    bot_token: SecretRef
    webhook_secret: SecretRef  # 1–256 of A-Z a-z 0-9 _ - (Telegram's rule for secret_token)
    api_url: HttpUrl = "https://api.telegram.org"


FEISHU_DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}


class FeishuConfig(_Section):
    """A Feishu / Lark custom app with the bot capability and callbacks to ``/hooks/feishu``."""

    app_id: str
    app_secret: SecretRef
    verification_token: SecretRef
    encrypt_key: SecretRef  # required: it signs and encrypts every callback
    domain: Literal["feishu", "lark"] = "feishu"
    api_url: HttpUrl | None = None  # overrides the domain's open platform URL (tests)

    @property
    def base_url(self) -> str:
        return self.api_url or FEISHU_DOMAINS[self.domain]


class DingTalkConfig(_Section):
    """A DingTalk app with a robot and an interactive card template (see docs/channels.md)."""

    app_key: Id
    app_secret: SecretRef
    robot_code: Id
    card_template_id: str
    callback_route_key: str
    api_url: HttpUrl = "https://api.dingtalk.com"


class WebhookConfig(_Section):
    """A Standard Webhooks subscriber: where events go and the shared secret (``whsec_…``)."""

    url: HttpUrl
    secret: SecretRef
    events: list[WebhookEvent] = Field(default_factory=lambda: list(WEBHOOK_EVENTS))


class TeamsConfig(_Section):
    """A Teams Workflows webhook (its URL carries a signature, so it is a secret)."""

    workflow_url: SecretRef


class ConsoleConfig(_Section):
    """Print requests and outcomes to the terminal (development)."""

    stream: Literal["stderr", "stdout"] = "stderr"
    interactive: bool = False  # ask the principal at the agent's own terminal (a TTY)


class DeliveryConfig(_Section):
    """How the outbox worker sends: lease, retries with capped exponential backoff."""

    lease: Duration = 60.0
    max_attempts: int = Field(default=10, ge=1, le=100)
    backoff: Duration = 1.0
    backoff_cap: Duration = 300.0
    timeout: Duration = 15.0
    poll: Duration = 1.0


def _console(value: object) -> object:
    return {} if value is True else value


def _durations(value: object) -> object:
    return value if isinstance(value, list) else [value]


class ChannelsConfig(_Section):
    """The whole ``channels:`` section."""

    slack: SlackConfig | None = None
    discord: DiscordConfig | None = None
    email: EmailConfig | None = None
    line: LineConfig | None = None
    telegram: TelegramConfig | None = None
    feishu: FeishuConfig | None = None
    dingtalk: DingTalkConfig | None = None
    webhooks: list[WebhookConfig] = Field(default_factory=list)
    teams: TeamsConfig | None = None
    console: Annotated[ConsoleConfig | None, BeforeValidator(_console)] = None
    remind_before: Annotated[list[Duration], BeforeValidator(_durations)] = Field(
        default_factory=list
    )
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)


def parse(section: Mapping[str, Any], *, filename: str = "signoff.yaml") -> ChannelsConfig:
    """Validate the section; raises PolicyError naming the key."""
    try:
        config = ChannelsConfig.model_validate(dict(section))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        message = str(err["msg"]).removeprefix("Value error, ")
        raise PolicyError(message, path=f"channels.{where}", file=filename) from None
    return config


def secret_paths(config: BaseModel, prefix: str) -> list[tuple[str, Secret]]:
    """Every secret reference in a channel's config with its key path (for error messages)."""
    found: list[tuple[str, Secret]] = []
    for name, value in config:
        path = f"{prefix}.{name}"
        if isinstance(value, Secret):
            found.append((path, Secret(value.env, path)))
        elif isinstance(value, BaseModel):
            found.extend(secret_paths(value, path))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    found.extend(secret_paths(item, f"{path}[{i}]"))
    return found


def missing_secrets(config: BaseModel, prefix: str) -> str | None:
    """None when every secret of the config is set in the environment, else which are not."""
    missing = [
        f"{path} (${{{s.env}}})" for path, s in secret_paths(config, prefix) if not s.available()
    ]
    return "environment variables not set: " + ", ".join(missing) if missing else None


def check_sections(sections: Mapping[str, Mapping[str, Any]], *, filename: str) -> None:
    """The ``channels:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    if sections.get("channels"):
        parse(sections["channels"], filename=filename)
