"""``signoff watch``: a live approval inbox in the terminal (the ``signoff[tui]`` extra).

Nothing in signoff's core imports this package; the CLI imports it only for ``watch``.
"""

from signoff.tui.app import WatchApp
from signoff.tui.sources import LocalSource, ServerSource, Source

__all__ = ["LocalSource", "ServerSource", "Source", "WatchApp"]
