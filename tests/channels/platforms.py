"""Telegram, Feishu/Lark and DingTalk callbacks built the way each platform sends them:
Telegram's static secret header and ``Update`` JSON; Feishu's AES-256-CBC body with the
SHA-256 signature over timestamp + nonce + encrypt key + body; DingTalk's card callback
with the parameters the card's buttons carry."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import time
import uuid
from typing import Any

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from signoff.channels import Inbound
from tests.channels.conftest import FEISHU_ENCRYPT_KEY, FEISHU_VERIFICATION_TOKEN, TELEGRAM_SECRET

_update_ids = itertools.count(int(time.time()))


# ---------------------------------------------------------------- Telegram
def telegram_callback(update: dict[str, Any], *, secret: str | None = TELEGRAM_SECRET) -> Inbound:
    headers = {} if secret is None else {"x-telegram-bot-api-secret-token": secret}
    return Inbound(headers, json.dumps(update).encode(), time.time())


def telegram_click(data: str, user: int, *, update_id: int | None = None) -> dict[str, Any]:
    return {
        "update_id": update_id if update_id is not None else next(_update_ids),
        "callback_query": {
            "id": uuid.uuid4().hex[:16],
            "from": {"id": user, "is_bot": False, "first_name": "A"},
            "message": {"message_id": 77, "chat": {"id": user, "type": "private"}},
            "chat_instance": "ci",
            "data": data,
        },
    }


def telegram_text(text: str, user: int, *, reply_to: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "message_id": 90,
        "from": {"id": user, "is_bot": False, "first_name": "A"},
        "chat": {"id": user, "type": "private"},
        "date": int(time.time()),
        "text": text,
    }
    if reply_to is not None:
        msg["reply_to_message"] = {
            "message_id": 89,
            "from": {"id": 123456, "is_bot": True, "first_name": "signoff"},
            "chat": {"id": user, "type": "private"},
            "date": int(time.time()),
            "text": reply_to,
        }
    return {"update_id": next(_update_ids), "message": msg}


# ---------------------------------------------------------------- Feishu / Lark
def feishu_encrypt(plain: bytes, key: str = FEISHU_ENCRYPT_KEY) -> str:
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    data = padder.update(plain) + padder.finalize()
    aes = Cipher(algorithms.AES(hashlib.sha256(key.encode()).digest()), modes.CBC(iv))
    enc = aes.encryptor()
    return base64.b64encode(iv + enc.update(data) + enc.finalize()).decode()


def feishu_callback(
    event: dict[str, Any],
    *,
    key: str = FEISHU_ENCRYPT_KEY,
    sign_key: str | None = None,
    ts: float | None = None,
    signed: bool = True,
) -> Inbound:
    """The body encrypted under ``key``, signed with ``sign_key`` (default: the same)."""
    now = time.time()
    body = json.dumps({"encrypt": feishu_encrypt(json.dumps(event).encode(), key)}).encode()
    headers: dict[str, str] = {}
    if signed:
        stamp, nonce = str(int(ts if ts is not None else now)), uuid.uuid4().hex
        material = (stamp + nonce + (sign_key or key)).encode() + body
        headers = {
            "x-lark-request-timestamp": stamp,
            "x-lark-request-nonce": nonce,
            "x-lark-signature": hashlib.sha256(material).hexdigest(),
        }
    return Inbound(headers, body, now)


def feishu_click(
    value: dict[str, str], open_id: str, *, token: str = FEISHU_VERIFICATION_TOKEN
) -> dict[str, Any]:
    """A ``card.action.trigger`` callback (schema 2.0)."""
    return {
        "schema": "2.0",
        "header": {
            "event_id": uuid.uuid4().hex,
            "token": token,
            "create_time": str(int(time.time() * 1000)),
            "event_type": "card.action.trigger",
            "tenant_key": "tenant",
            "app_id": "cli_test",
        },
        "event": {
            "operator": {"tenant_key": "tenant", "open_id": open_id, "union_id": "on_x"},
            "token": "c-update-token",
            "action": {"value": value, "tag": "button"},
            "host": "im_message",
            "context": {"open_message_id": "om_1", "open_chat_id": "oc_1"},
        },
    }


# ---------------------------------------------------------------- DingTalk
def dingtalk_callback(out_track_id: str, user: str, params: dict[str, str]) -> Inbound:
    private = json.dumps({"cardPrivateData": {"actionIds": ["approve_btn"], "params": params}})
    body = {
        "extension": "{}",
        "corpId": "dingcorp",
        "userId": user,
        "userIdType": 1,
        "type": "actionCallback",
        "outTrackId": out_track_id,
        "content": private,
        "value": private,
    }
    return Inbound({}, json.dumps(body).encode(), time.time())
