"""signoff for LangChain / LangGraph agents (the ``signoff[langchain]`` extra).

>>> from signoff.integrations.langchain import SignoffMiddleware, resume  # doctest: +SKIP
>>> agent = create_agent(model, tools, checkpointer=InMemorySaver(),      # doctest: +SKIP
...                      middleware=[SignoffMiddleware({"delete_file": True})])

See ``docs/langchain.md``.
"""

try:
    import langchain.agents  # noqa: F401
    import langgraph.types  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "signoff.integrations.langchain needs LangChain and LangGraph: "
        "pip install 'signoff[langchain]'"
    ) from exc

from signoff.integrations.langchain._model_step import ChangedWhilePaused, SetupError
from signoff.integrations.langchain.middleware import SignoffMiddleware
from signoff.integrations.langchain.resume import (
    NotDecided,
    aresume,
    pending_request_ids,
    resume,
)
from signoff.integrations.langchain.shapes import (
    ActionRequest,
    Decision,
    HITLRequest,
    HITLResponse,
    InterruptOnConfig,
    ReviewConfig,
    hitl_request,
)

__all__ = [
    "ActionRequest",
    "ChangedWhilePaused",
    "Decision",
    "HITLRequest",
    "HITLResponse",
    "InterruptOnConfig",
    "NotDecided",
    "ReviewConfig",
    "SetupError",
    "SignoffMiddleware",
    "aresume",
    "hitl_request",
    "pending_request_ids",
    "resume",
]
