"""signoff for Pydantic AI (the ``signoff[pydantic-ai]`` extra, on ``pydantic-ai-slim``).

>>> from signoff.integrations.pydantic_ai import SignoffToolset, aresults  # doctest: +SKIP
>>> agent = Agent(model, toolsets=[SignoffToolset(tools, gate)],
...               output_type=[str, DeferredToolRequests])
>>> run = await agent.run("clean up")                                  # doctest: +SKIP
>>> if isinstance(run.output, DeferredToolRequests):                    # doctest: +SKIP
...     run = await agent.run(message_history=run.all_messages(),
...                           deferred_tool_results=await aresults(run.output, gate))

See ``docs/pydantic-ai.md``.
"""

try:
    import pydantic_ai.toolsets  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "signoff.integrations.pydantic_ai needs Pydantic AI: pip install 'signoff[pydantic-ai]'"
    ) from exc

from signoff.integrations.pydantic_ai.results import REQUEST_ID, NotDecided, aresults, results
from signoff.integrations.pydantic_ai.toolset import SetupError, SignoffToolset

__all__ = ["REQUEST_ID", "NotDecided", "SetupError", "SignoffToolset", "aresults", "results"]
