"""Throwaway PostgreSQL clusters for tests and benchmarks (research §4, the CI recipe).

``initdb`` + ``pg_ctl`` from the Debian ``postgresql`` package, in a temporary directory, on a
free port on 127.0.0.1, trust auth. As root the server runs as ``postgres`` (``initdb`` refuses
root), via ``runuser``. Settings go into ``postgresql.conf``, so a crashed or restarted cluster
comes back on the same port. ``fast`` turns fsync off (contract tests; still survives a kill
of the server, not of the machine); the default is durable (crash tests, benchmarks).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SETUP_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found under /usr/lib/postgresql/*/bin. "
    "Run `scripts/setup-system.sh` as root (it installs the Debian `postgresql` package; "
    "`make test` does this for you), or point TEST_PG_DSN at a database you may create "
    "schemas in."
)


def pg_bin() -> Path | None:
    """The newest installed PostgreSQL server bin directory, if any."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: [int(x) if x.isdigit() else x for x in p.parent.parent.name.split(".")],
    )
    return found[-1].parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One throwaway cluster; ``url`` connects as the ``postgres`` superuser."""

    def __init__(self, *, fast: bool) -> None:
        bindir = pg_bin()
        if bindir is None:
            raise RuntimeError(SETUP_HINT)
        self.bin = bindir
        self.fast = fast
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="signoff-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "log"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def start(self) -> Cluster:
        if self._as_postgres:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync")
        settings = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.dir}'",
            "max_connections = 200",
        ]
        if self.fast:
            settings += ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n".join(settings) + "\n")
        self._pg_ctl("start")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", *extra, action)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {action} failed: {done.stderr}\n{self.log_tail()}")

    def restart_immediately(self) -> None:
        """Crash the server (``-m immediate``: no checkpoint, crash recovery on start)."""
        self._pg_ctl("restart", "-m", "immediate")

    def stop_immediately(self) -> None:
        self._pg_ctl("stop", "-m", "immediate")

    def start_again(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text().splitlines()[-lines:])
        except OSError:
            return ""


def wait_until_accepting(url: str, timeout: float = 30.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_shared: Cluster | None = None


def shared_url() -> tuple[str, Cluster | None]:
    """``TEST_PG_DSN`` if set, else one fast cluster per test run (started on first use)."""
    global _shared
    if os.environ.get("TEST_PG_DSN"):
        return os.environ["TEST_PG_DSN"], None
    if _shared is None:
        _shared = Cluster(fast=True).start()
        return _shared.url, _shared
    return _shared.url, None


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
