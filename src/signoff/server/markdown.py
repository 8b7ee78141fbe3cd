"""Agent-written markdown (an inquiry asked with ``format: markdown``) as safe HTML.

The text is the agent's, so it is hostile until shown otherwise: markdown-it-py renders it
with raw HTML off (``<script>`` stays text), no images (no tracking pixels; the CSP would
block them anyway), no tables (their alignment is an inline style the CSP forbids), and links
only to ``http``, ``https`` and ``mailto`` — never ``javascript:``, ``data:`` or relative
URLs into the inbox — opened in a new tab without referrer. Control, bidi and invisible
characters are made visible first, like every other value on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from signoff.model.text import inert

SAFE_SCHEMES: tuple[str, ...] = ("http://", "https://", "mailto:")


def _safe_link(url: str) -> bool:
    return url.strip().lower().startswith(SAFE_SCHEMES)


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    token.attrSet("rel", "nofollow noopener noreferrer")
    token.attrSet("target", "_blank")
    return str(self.renderToken(tokens, idx, options, env))


def _parser() -> MarkdownIt:
    md = MarkdownIt("js-default", {"html": False, "linkify": False, "typographer": False})
    md.disable(["image", "table"])
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    return md


_MD = _parser()


def render_markdown(text: str) -> Markup:
    """``text`` as HTML that cannot run, load or hide anything."""
    return Markup(_MD.render(inert(text, keep_newlines=True)))
