"""Errors as one line, never a traceback.

Every command is wrapped by :func:`clean_errors` (``guard_commands`` does it for everything
registered on the app, so a new command is covered without thinking about it). Whatever a
command meets — a policy, store, file or input error — becomes one line on stderr and an exit
code: 2 for bad input or configuration (the user must change something), 1 for runtime and
store trouble. With ``--json`` the same error is also a JSON object on stdout,
``{"error": "store_unavailable", "message": "..."}``. ``SIGNOFF_DEBUG=1`` re-raises instead,
for a traceback.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from signoff.model import (
    AlreadyDecided,
    DecisionError,
    NotFound,
    PolicyError,
    SignoffError,
    StoreError,
)

F = TypeVar("F", bound=Callable[..., Any])

_err = Console(stderr=True, highlight=False, soft_wrap=True)
_as_json: ContextVar[bool] = ContextVar("signoff_cli_json_errors", default=False)

# typer's own exits and usage errors already print cleanly and carry their exit code.
_PASS_THROUGH: tuple[type[BaseException], ...] = (
    typer.Exit,
    typer.Abort,
    *(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"),
)


def one_line(message: str) -> str:
    """``message`` on one line: ``"a:\\nb\\nc"`` → ``"a: b; c"``."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    out = ""
    for line in lines:
        out += line if not out else (" " if out.endswith(":") else "; ") + line
    return out


def report(message: str, code: int = 1, kind: str | None = None) -> NoReturn:
    """Print the error (and, under ``--json``, emit it on stdout) and exit with ``code``."""
    text = one_line(message)
    _err.print(f"[bold red]error:[/] {escape(text)}")
    if _as_json.get():
        sys.stdout.write(json.dumps({"error": kind or _KIND_BY_CODE[code], "message": text}))
        sys.stdout.write("\n")
    raise typer.Exit(code)


_KIND_BY_CODE = {1: "failed", 2: "invalid_input"}


def describe(exc: BaseException) -> tuple[str, int, str]:
    """(message, exit code, error kind) for an exception a command did not handle."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, PolicyError):
        return f"invalid policy: {exc}", 2, "invalid_policy"
    if isinstance(exc, NotFound):
        return str(exc), 1, "not_found"
    if isinstance(exc, AlreadyDecided):
        return str(exc), 1, "already_decided"
    if isinstance(exc, DecisionError):
        return str(exc), 2, "invalid_decision"
    if isinstance(exc, StoreError):  # its message names the store already
        return str(exc), 1, "store_unavailable"
    if _is_database_error(exc):
        return f"the store cannot be used: {exc}", 1, "store_unavailable"
    if isinstance(exc, SignoffError):
        return str(exc), 1, "failed"
    if isinstance(exc, OSError):
        return str(exc), 1, "os_error"
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply", 2, "invalid_input"
    if isinstance(exc, ValueError):  # bad JSON, text or numbers given on the command line
        return str(exc), 2, "invalid_input"
    return (
        f"{type(exc).__name__}: {exc} (SIGNOFF_DEBUG=1 shows the traceback)",
        1,
        "internal_error",
    )


def _is_database_error(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) or type(exc).__module__.startswith("psycopg")


def clean_errors(command: F) -> F:
    """Wrap a command: unhandled errors become :func:`report` calls."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        token = _as_json.set(bool(kwargs.get("as_json", False)))
        try:
            return command(*args, **kwargs)
        except _PASS_THROUGH:
            raise
        except Exception as exc:
            if os.environ.get("SIGNOFF_DEBUG"):
                raise
            message, code, kind = describe(exc)
            report(message, code, kind)
        finally:
            _as_json.reset(token)

    guarded.__signoff_guarded__ = True  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


def guard_commands(app: typer.Typer) -> None:
    """Wrap every command registered on ``app`` and its sub-apps (once)."""
    for info in app.registered_commands:
        callback = info.callback
        if callback is not None and not getattr(callback, "__signoff_guarded__", False):
            info.callback = clean_errors(callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            guard_commands(group.typer_instance)
