"""``signoff serve``: the approval server — REST API, web inbox, one-click links, SSE.

Needs the ``signoff[server]`` extra (starlette, uvicorn, sse-starlette, jinja2,
python-multipart). ``create_app(gate)`` builds the ASGI app; ``ServerThread`` runs it in the
background (tests, demo); ``serve`` runs it in the foreground.
"""

from signoff.server.app import create_app
from signoff.server.links import LinkIssuer
from signoff.server.runner import ServerThread, serve
from signoff.server.settings import ServerSettings
from signoff.server.tokens import create_token, revoke_token

__all__ = [
    "LinkIssuer",
    "ServerSettings",
    "ServerThread",
    "create_app",
    "create_token",
    "revoke_token",
    "serve",
]
