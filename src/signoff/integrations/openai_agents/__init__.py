"""signoff for the OpenAI Agents SDK (the ``signoff[openai-agents]`` extra).

>>> from signoff.integrations.openai_agents import signoff_tools, resolve  # doctest: +SKIP
>>> agent = Agent(name="ops", tools=signoff_tools(gate, [read_file, delete_file]))
>>> result = await Runner.run(agent, "clean up")                 # doctest: +SKIP
>>> if result.interruptions:                                      # doctest: +SKIP
...     result = await Runner.run(agent, await aresolve(result, gate))

See ``docs/openai-agents.md``.
"""

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "signoff.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'signoff[openai-agents]'"
    ) from exc

from signoff.integrations.openai_agents.resolve import aresolve, resolve
from signoff.integrations.openai_agents.tools import signoff_tools

__all__ = ["aresolve", "resolve", "signoff_tools"]
