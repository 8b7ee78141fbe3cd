"""``signoff audit verify`` and ``signoff audit anchor``: the audit log's guarantees.

``verify`` checks the hash chain, the signed checkpoints (``--anchors``, default: the
``audit.anchor`` file) and every request row against its audit events; ``anchor`` is the
checkpoint writer for setups without ``signoff serve`` (a sidecar, or ``--once`` from cron).
Both read the store directly, like the other local admin commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from signoff.audit import (
    Anchorer,
    AnchorTarget,
    AuditReport,
    AuditSettings,
    Finding,
    open_sink,
    parse_anchor,
    read_checkpoints,
    verify_log,
)
from signoff.cli.main import ConfigOpt, JsonOpt, audit_app, emit_json, err, fail, load_policy, out
from signoff.model import PolicyError, SignoffError
from signoff.policy import Policy
from signoff.policy.durations import parse_duration
from signoff.store import Store, open_store

_HEAD = re.compile(r"(\d+):([0-9a-f]{64})")


def register(app: typer.Typer) -> None:
    """The commands are on ``audit_app`` (defined by :mod:`signoff.cli.main`) already."""


def _setup(config: Path | None) -> tuple[Policy, AuditSettings, Store]:
    policy = load_policy(config)
    if policy.sections.get("remote"):
        fail("this config points at a remote server; run the audit commands where the store is", 2)
    try:
        settings = AuditSettings.from_policy(policy)
    except PolicyError as exc:
        fail(f"invalid audit: section: {exc}", 2)
    try:
        store = open_store(policy.store_url)
    except SignoffError as exc:
        fail(str(exc), 2)
    return policy, settings, store


def _base_dir(policy: Policy) -> Path | None:
    return policy.path.resolve().parent if policy.path else None


# ---------------------------------------------------------------------- verify
@audit_app.command("verify")
def audit_verify(
    config: ConfigOpt = None,
    anchors: Annotated[
        Path | None,
        typer.Option(
            "--anchors",
            help="Checkpoint file (JSONL); default: the audit.anchor file, if it is one.",
            show_default=False,
        ),
    ] = None,
    expect_head: Annotated[
        str | None,
        typer.Option(
            "--expect-head",
            metavar="SEQ:HASH",
            help="A row noted earlier (e.g. a previous run's head) that must still be there.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify the audit log: hash chain, signed checkpoints, requests against their events.

    Exit 0 when nothing is wrong, 1 naming every finding.
    """
    expected = _expected_head(expect_head) if expect_head else None
    policy, settings, store = _setup(config)
    source = anchors or _default_anchors(settings, _base_dir(policy))
    if anchors is not None and not anchors.exists():
        fail(f"no checkpoint file at {anchors}", 2)
    missing = source is not None and not source.exists()  # audit.anchor's file is gone
    checkpoints, bad = (None, []) if source is None else _read_anchors(source, missing)
    report = asyncio.run(_verify(store, checkpoints, bad, settings.key_bytes, expected))
    if missing and report.head_seq:
        report.findings.append(
            Finding(
                "checkpoint",
                f"no checkpoint file at {source} (audit.anchor): nothing was ever anchored, "
                "or the file was deleted",
            )
        )
    if source is None and settings.anchor is not None:
        report.warnings.append(
            f"checkpoints go to {settings.anchor}; pass --anchors FILE with what it kept"
        )
    if as_json:
        emit_json({**report.to_json(), "anchors": str(source) if source else None})
    else:
        _print_report(report, source)
    raise typer.Exit(0 if report.ok else 1)


def _expected_head(text: str) -> tuple[int, str]:
    match = _HEAD.fullmatch(text.strip().lower())
    if not match:
        fail(f"--expect-head must be SEQ:HASH (a row number and 64 hex digits), got {text!r}", 2)
    return int(match.group(1)), match.group(2)


def _default_anchors(settings: AuditSettings, base_dir: Path | None) -> Path | None:
    target = settings.target(base_dir)
    if target is None or target.kind != "file":
        return None
    return Path(target.where)


def _read_anchors(path: Path, missing: bool) -> tuple[list[Any] | None, list[Any]]:
    if missing:
        return [], []
    try:
        return read_checkpoints(path)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}", 2)


async def _verify(
    store: Store,
    checkpoints: list[Any] | None,
    bad: list[Any],
    key: bytes | None,
    expected: tuple[int, str] | None,
) -> AuditReport:
    await store.open()
    try:
        return await verify_log(
            store, checkpoints=checkpoints, bad_lines=bad, key=key, expect_head=expected
        )
    finally:
        await store.close()


def _print_report(report: AuditReport, source: Path | None) -> None:
    out.print(f"audit log head: seq {report.head_seq}, hash {report.head_hash}")
    chain = report.chain
    if chain.ok:
        out.print(f"[green]✓[/] hash chain intact ({chain.checked} rows)")
    if report.checkpoints:
        anchored = report.anchored_seq or 0
        signed = {"verified": "signatures verified", "unchecked": "signatures NOT checked"}
        out.print(
            f"{'[green]✓[/]' if anchored else '[yellow]![/]'} {report.checkpoints} checkpoint(s) "
            f"from {escape(str(source))}, {signed.get(report.signatures, report.signatures)}; "
            f"anchored up to seq {anchored} ({report.unanchored} row(s) after it not covered)"
        )
    out.print(f"  {report.requests_checked} request(s) cross-checked against their events")
    for finding in report.findings:
        err.print(f"[bold red]✗[/] {escape(finding.message)}")
    for warning in report.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}")
    if report.ok:
        out.print("[green]✓[/] audit log intact")
    else:
        err.print(f"[bold red]✗ {len(report.findings)} finding(s)[/]")


# ---------------------------------------------------------------------- anchor
@audit_app.command("anchor")
def audit_anchor(
    config: ConfigOpt = None,
    interval: Annotated[
        str | None,
        typer.Option(
            "--interval",
            help="Checkpoint when anything changed (default audit.anchor_interval, 10s).",
            show_default=False,
        ),
    ] = None,
    every: Annotated[
        int | None,
        typer.Option(
            "--every",
            min=1,
            help="Checkpoint every N events (default audit.anchor_every, 100).",
            show_default=False,
        ),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Sink (default audit.anchor): file:///path.jsonl or https://…",
            show_default=False,
        ),
    ] = None,
    signer: Annotated[
        str | None,
        typer.Option(
            "--signer",
            help="Name in each checkpoint (default audit.signer or hostname:pid).",
            show_default=False,
        ),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Write one checkpoint and exit.")] = False,
) -> None:
    """Write signed checkpoints of the audit log until stopped (SIGTERM/Ctrl-C writes a last
    one) — the sidecar for setups without `signoff serve`."""
    policy, settings, store = _setup(config)
    key = settings.key_bytes
    if key is None:
        fail("audit.key is not set: checkpoints are signed (key: ${SIGNOFF_AUDIT_KEY})", 2)
    target = _target(to, settings, _base_dir(policy))
    seconds = _seconds(interval) if interval else settings.anchor_interval
    anchorer = Anchorer(
        store,
        open_sink(target),
        key,
        signer=signer or settings.signer_name(),
        every=every or settings.anchor_every,
        interval=seconds,
    )
    written = asyncio.run(_anchor(store, anchorer, once))
    head = anchorer.last
    where = escape(anchorer.sink.name)
    if head is None:
        out.print(f"no checkpoint written to {where} (the audit log is empty)")
    else:
        out.print(f"{written} checkpoint(s) written to {where}; last: seq {head[0]} {head[1]}")


def _target(to: str | None, settings: AuditSettings, base_dir: Path | None) -> AnchorTarget:
    if to is None:
        target = settings.target(base_dir)
        if target is None:
            fail("no sink: set audit.anchor in the config, or pass --to", 2)
        return target
    try:
        target = parse_anchor(to)
    except ValueError as exc:
        fail(f"--to: {exc}", 2)
    if target.kind == "file" and not Path(target.where).is_absolute():
        return AnchorTarget("file", str(Path.cwd() / target.where))
    return target


def _seconds(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except PolicyError as exc:
        fail(f"--interval: {exc.message}", 2)
    if seconds <= 0:
        fail("--interval must be positive", 2)
    return seconds


async def _anchor(store: Store, anchorer: Anchorer, once: bool) -> int:
    await store.open()
    try:
        if once:
            await anchorer.anchor()
            await anchorer.sink.close()
            return anchorer.written
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, anchorer.request_stop)
        await anchorer.run()
        await anchorer.stop()
        return anchorer.written
    finally:
        await store.close()
