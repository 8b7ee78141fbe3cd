"""The ``signoff`` command line."""

from signoff.cli.main import app, main

__all__ = ["app", "main"]
