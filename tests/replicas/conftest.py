"""Two ``signoff serve`` processes on one PostgreSQL database (the throwaway cluster of the
store tests, :mod:`tests.store.pg_cluster`; ``TEST_PG_DSN`` to use another)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from signoff.cli import app
from tests.store import pg_cluster

POLICY = """
version: 1
people:
  bob:   {roles: [finance]}
  frank: {roles: []}
tools:
  transfer_funds:
    default: require_approval
    approvers: {roles: [finance]}
    timeout: 10m
  quick_transfer:
    default: require_approval
    approvers: {roles: [finance]}
    timeout: 2s
"""


@pytest.fixture(scope="session")
def pg_url(request: pytest.FixtureRequest) -> str:
    try:
        url, started = pg_cluster.shared_url()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    if started is not None:
        request.config.add_cleanup(started.stop)
    return url


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    name = f"replicas_{secrets.token_hex(4)}"
    yield name
    pg_cluster.drop_schema(pg_url, name)


@pytest.fixture
def config(pg_url: str, schema: str, tmp_path: Path) -> Path:
    path = tmp_path / "signoff.yaml"
    path.write_text(textwrap.dedent(POLICY) + f"store: {pg_url}?schema={schema}\n")
    return path


def token(config: Path, *who: str) -> str:
    result = CliRunner().invoke(app, ["token", "create", *who, "--json", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return str(json.loads(result.output)["token"])


@dataclass
class Replica:
    """One ``signoff serve`` process."""

    process: subprocess.Popen[str]
    url: str

    def client(self, bearer: str, timeout: float = 30) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {bearer}"}, timeout=timeout
        )

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.stdout.read() if self.process.stdout else ""


def serve(config: Path) -> Replica:
    port = pg_cluster.free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "signoff", "serve", "--config", str(config), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    replica = Replica(process, f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 60
    while True:  # waiting for a child process to start listening
        try:
            if httpx.get(f"{replica.url}/healthz").status_code == 200:
                return replica
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"signoff serve did not start:\n{replica.stop()}")
        time.sleep(0.1)


@pytest.fixture
def replicas(config: Path) -> Iterator[tuple[Replica, Replica]]:
    pair = (serve(config), serve(config))
    yield pair
    for replica in pair:
        replica.stop()
