"""The channels a policy's ``channels:`` section configures, one object per channel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from signoff.channels import Channel, Messenger
from signoff.channels.config import parse
from signoff.channels.console import ConsoleChannel
from signoff.channels.email import EmailChannel
from signoff.policy import Policy


def build_channels(policy: Policy) -> list[Channel | Messenger]:
    """The channels configured in the policy's ``channels:`` section (validated; secrets
    stay ``${ENV}`` references until a message is sent)."""
    section = policy.sections.get("channels") or {}
    return build(section) if section else []


def build(section: Mapping[str, Any]) -> list[Channel | Messenger]:
    """One channel object per configured channel, in a fixed order."""
    config = parse(section)
    out: list[Channel | Messenger] = []
    if config.console is not None:
        out.append(ConsoleChannel(config.console))
    # The HTTP channels are imported only when configured: they need httpx, which comes
    # with the optional extras signoff[server] / signoff[client].
    if config.slack is not None:
        from signoff.channels.slack import SlackChannel

        out.append(SlackChannel(config.slack))
    if config.discord is not None:
        from signoff.channels.discord import DiscordChannel

        out.append(DiscordChannel(config.discord))
    if config.email is not None:
        out.append(EmailChannel(config.email))
    if config.line is not None:
        from signoff.channels.line import LineChannel

        out.append(LineChannel(config.line))
    if config.telegram is not None:
        from signoff.channels.telegram import TelegramChannel

        out.append(TelegramChannel(config.telegram))
    if config.feishu is not None:
        from signoff.channels.feishu import FeishuChannel

        out.append(FeishuChannel(config.feishu))
    if config.dingtalk is not None:
        from signoff.channels.dingtalk import DingTalkChannel

        out.append(DingTalkChannel(config.dingtalk))
    if config.webhooks:
        from signoff.channels.webhooks import WebhookChannel

        out.append(WebhookChannel(config.webhooks))
    if config.teams is not None:
        from signoff.channels.teams import TeamsChannel

        out.append(TeamsChannel(config.teams))
    return out
