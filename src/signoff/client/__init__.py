"""Remote agents: :class:`RemoteGate` offers the :class:`~signoff.Gate` API over the HTTP
API of ``signoff serve`` (needs the ``signoff[client]`` extra: httpx).

>>> from signoff.client import RemoteGate
>>> gate = RemoteGate("https://signoff.example.com", os.environ["SIGNOFF_TOKEN"])  # doctest: +SKIP
"""

from signoff.client.http import ServerUnavailable, Unauthorized
from signoff.client.remote import RemoteGate, RemoteSubmission

__all__ = ["RemoteGate", "RemoteSubmission", "ServerUnavailable", "Unauthorized"]
