"""The edit notice a model reads after a reviewer's edit never repeats a secret-named value
(secret-named arguments are not editable, but the notice lists every argument that ran)."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import tool

from signoff.integrations.langchain import SignoffMiddleware
from tests.integrations.langchain.conftest import tool_call
from tests.integrations.langchain.test_compat_ported import decide, edit, pause, tool_messages

RAN: list[dict[str, Any]] = []


@tool
def connect(host: str, password: str) -> str:
    """Connect to a host."""
    RAN.append({"host": host, "password": password})
    return f"connected to {host}"


def test_the_edit_notice_masks_secret_named_arguments() -> None:
    RAN.clear()
    middleware = SignoffMiddleware({"connect": True})
    call = tool_call("connect", {"host": "db-prod", "password": "hunter2-secret"}, "c1")
    agent, cfg, _ = pause(middleware, [connect], call)
    out = decide(agent, cfg, edit("connect", host="db-staging", password="hunter2-secret"))
    content = str(tool_messages(out.value["messages"])["c1"].content)
    assert RAN == [{"host": "db-staging", "password": "hunter2-secret"}]  # ran as edited
    assert '"host": "db-staging"' in content and "connected to db-staging" in content
    assert "hunter2-secret" not in content and '"password": "' in content
