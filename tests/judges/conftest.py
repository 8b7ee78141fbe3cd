"""Judge fixtures: a loopback chat-completions server, stopped at teardown."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.judges.fake_openai import FakeOpenAI


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    pytest.importorskip("uvicorn")
    pytest.importorskip("starlette")
    from tests.judges.fake_openai import FakeOpenAI

    fake = FakeOpenAI()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()
