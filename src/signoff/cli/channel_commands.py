"""``signoff channels setup telegram``: point the bot's webhook at the server and print each
approver's onboarding link.

Telegram is the one channel whose callback URL is set through its own API (``setWebhook``,
with the secret token Telegram then sends on every update). Slack, Discord, LINE, Feishu
and DingTalk take the URL in their developer consoles (docs/channels.md).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from signoff.cli.main import ConfigOpt, JsonOpt, emit_json, fail, load_policy, out
from signoff.model import PolicyError

channels_app = typer.Typer(help="Set up notification channels.", no_args_is_help=True)
setup_app = typer.Typer(help="Register signoff with a provider.", no_args_is_help=True)
channels_app.add_typer(setup_app, name="setup")

UrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The server's public URL (default: serve.public_url); /hooks/telegram is added.",
        show_default=False,
    ),
]

SECRET_HINT = (
    "Telegram accepts 1-256 characters of A-Z a-z 0-9 _ - as the secret; make one with "
    "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
)


def register(app: typer.Typer) -> None:
    app.add_typer(channels_app, name="channels")


@setup_app.command("telegram")
def setup_telegram(url: UrlOpt = None, config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Call setWebhook with the webhook secret; print a /start link for each person."""
    from signoff.channels.config import parse
    from signoff.channels.telegram import SECRET_TOKEN, TelegramChannel, link_code

    policy = load_policy(config)
    telegram = parse(policy.sections.get("channels") or {}).telegram
    if telegram is None:
        fail("channels.telegram is not configured in the policy file", 2)
    try:
        secret = telegram.webhook_secret.value()
        telegram.bot_token.value()
    except PolicyError as exc:
        fail(str(exc), 2)
    if not SECRET_TOKEN.fullmatch(secret):
        fail(f"channels.telegram.webhook_secret: {SECRET_HINT}", 2)
    base = url or _public_url(policy.sections.get("serve") or {})
    if not base or not base.startswith(("https://", "http://")):
        fail("pass --url https://<your server> (or set serve.public_url)", 2)
    hook = base.rstrip("/") + "/hooks/telegram"
    username = asyncio.run(_register(TelegramChannel(telegram), hook, secret))
    links = {
        pid: f"https://t.me/{username}?start={link_code(secret, pid)}" for pid in policy.people
    }
    if as_json:
        emit_json({"webhook": hook, "bot": username, "links": links})
        return
    out.print(f"webhook set: {hook} (with the secret token; updates: message, callback_query)")
    out.print(f"bot: @{username}. Send each approver their link; /start tells them their id:")
    for pid, link in links.items():
        out.print(f"  {pid}: {link}")


def _public_url(serve: Any) -> str | None:
    found = serve.get("public_url") if isinstance(serve, dict) else None
    return found if isinstance(found, str) and "${" not in found else None


async def _register(channel: Any, hook: str, secret: str) -> str:
    import httpx

    from signoff.channels import DeliveryError

    async with httpx.AsyncClient(timeout=15.0) as http:
        try:
            await channel.call(
                http,
                "setWebhook",
                {
                    "url": hook,
                    "secret_token": secret,
                    "allowed_updates": ["message", "callback_query"],
                },
            )
            me = await channel.call(http, "getMe", {})
        except DeliveryError as exc:
            fail(f"Telegram refused: {exc}")
    return str((me or {}).get("username") or "your_bot")


__all__ = ["register", "setup_telegram"]
