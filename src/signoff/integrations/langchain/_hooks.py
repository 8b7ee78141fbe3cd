"""The middleware's ``wrap_*`` hooks, as LangChain's tracing can look at them for free.

``create_agent`` wraps every hook in LangSmith's ``traceable``, which — tracing on or off —
calls ``inspect.signature`` on the hook at *every* call. For a bound method that means
building the function's signature and then a copy without ``self``: about 90k instructions
per hook call, three per ungated agent step (~2.4% of the step, measured with callgrind).
For a plain function carrying a ready ``__signature__`` it is an attribute read.

So the hooks are :class:`FastHook` descriptors: ``middleware.wrap_tool_call`` is such a
function, made on each attribute access (``create_agent`` reads it once) with the bound
method's signature, ``__self__`` and name — callable and inspectable as the bound method
was. Read on the class, the hook is the plain function (LangChain's "is this hook
overridden" identity checks, ``super()`` calls and documentation tools see a method); a
subclass that overrides a hook gets an ordinary method.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


class FastHook:
    """A method whose bound form is a plain function with its signature precomputed."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        signature = inspect.signature(function)
        self.signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    def __get__(self, owner: object, owner_type: type | None = None) -> Callable[..., Any]:
        if owner is None:
            return self.function
        return self.bind(owner)

    def bind(self, owner: object) -> Callable[..., Any]:
        function = self.function
        hook: Any  # a function given a bound method's attributes below
        if self.is_async:

            async def hook(request: Any, handler: Any) -> Any:
                return await function(owner, request, handler)

        else:

            def hook(request: Any, handler: Any) -> Any:
                return function(owner, request, handler)

        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(hook, name, getattr(function, name))
        hook.__signature__ = self.signature
        hook.__self__ = owner  # as a bound method's
        return hook  # type: ignore[no-any-return]


def install(cls: type, names: tuple[str, ...]) -> None:
    """Make ``cls``'s own methods ``names`` fast hooks (after the class body, so type
    checkers and readers see ordinary methods)."""
    for name in names:
        setattr(cls, name, FastHook(vars(cls)[name]))
