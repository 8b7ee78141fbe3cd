"""pytest plugin for running LangChain's HumanInTheLoopMiddleware tests against signoff.

Loaded by ``run_langchain.py`` into a separate pytest process (``-p signoff_compat_plugin``).
Once the test modules are imported it rebinds ``HumanInTheLoopMiddleware`` in their
namespaces to ``SignoffMiddleware`` — only there: LangChain's own module keeps its class,
which is what ``SignoffMiddleware`` subclasses. Each test named in the expected-differences
file is marked ``xfail(strict=True, raises=...)``: a listed test that starts passing fails
the run, and so does one that fails with another exception than its category's (see
``FAILS_WITH``) or a listed name that matches no test.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain.agents.middleware.human_in_the_loop import HumanInTheLoopMiddleware

from signoff.integrations.langchain import SignoffMiddleware
from signoff.model import DecisionError

# Each category of the list, and how its tests fail. A listed test failing in another way
# has hit something the category does not explain (a bug, or a harness problem).
FAILS_WITH: dict[str, tuple[type[BaseException], ...]] = {
    # after_model is AgentMiddleware's no-op: asserts on its result fail, or nothing raises
    "white-box: calls middleware.after_model()": (AssertionError, pytest.fail.Exception),
    # the hand-built request has no usable runtime (None or a SimpleNamespace)
    "white-box: calls wrap_tool_call()": (AttributeError,),
    "edits that switch tools": (DecisionError,),
    'interrupt_mode="per_call"': (ValueError,),  # refused in __init__
    "retry after an executed call": (ValueError,),
}

_SECTION = re.compile(r"^\[(?P<category>[^\]]+)\]$")
_ENTRY = re.compile(r"^(?P<test>test_\S+?)\s+--\s+(?P<reason>\S.*)$")


@dataclass(frozen=True)
class ExpectedDifference:
    test: str  # a test function's name (all its parameters) or one parametrized id
    category: str
    reason: str
    fails_with: tuple[type[BaseException], ...]


def parse_expected_differences(text: str, source: str = "<text>") -> list[ExpectedDifference]:
    """``[category]`` headers, then one ``test_name -- reason`` line per test; ``#`` comments."""
    entries: list[ExpectedDifference] = []
    category = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if section := _SECTION.match(line):
            category = section["category"].strip()
            if _category_key(category) is None:
                known = ", ".join(FAILS_WITH)
                raise ValueError(
                    f"{source}:{number}: unknown category {category!r}; known: {known}"
                )
            continue
        entry = _ENTRY.match(line)
        if entry is None:
            raise ValueError(f"{source}:{number}: expected `test_name -- reason`, got {line!r}")
        if not category:
            raise ValueError(f"{source}:{number}: {entry['test']} is listed before any [category]")
        fails_with = FAILS_WITH[_category_key(category) or ""]
        entries.append(ExpectedDifference(entry["test"], category, entry["reason"], fails_with))
    twice = [name for name, n in Counter(e.test for e in entries).items() if n > 1]
    if twice:
        raise ValueError(f"{source}: listed more than once: {', '.join(sorted(twice))}")
    return entries


def _category_key(category: str) -> str | None:
    return next((key for key in FAILS_WITH if category.startswith(key)), None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--expected-differences",
        required=True,
        help="the file listing LangChain tests that are expected to fail with SignoffMiddleware",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = Path(config.getoption("--expected-differences"))
    expected = {e.test: e for e in parse_expected_differences(path.read_text("utf-8"), str(path))}
    matched: set[str] = set()
    substituted = {_substitute(item) for item in items}
    if items and substituted != {True}:
        raise pytest.UsageError(
            "a collected test module does not import HumanInTheLoopMiddleware by name, so "
            "SignoffMiddleware could not be put in its place; the harness needs updating"
        )
    for item in items:
        entry = _entry_for(item, expected)
        if entry is not None:
            matched.add(entry.test)
            reason = f"{entry.category}: {entry.reason}"
            marker = pytest.mark.xfail(strict=True, raises=entry.fails_with, reason=reason)
            item.add_marker(marker)
    unknown = sorted(set(expected) - matched)
    if unknown:
        raise pytest.UsageError(f"{path} lists tests that were not collected: {unknown}")


def _substitute(item: pytest.Item) -> bool:
    """Put SignoffMiddleware in place of LangChain's class in the item's module."""
    module = getattr(item, "module", None)
    bound = getattr(module, "HumanInTheLoopMiddleware", None)
    if bound is HumanInTheLoopMiddleware:
        module.HumanInTheLoopMiddleware = SignoffMiddleware  # type: ignore[union-attr]
    return getattr(module, "HumanInTheLoopMiddleware", None) is SignoffMiddleware


def _entry_for(
    item: pytest.Item, expected: dict[str, ExpectedDifference]
) -> ExpectedDifference | None:
    function = getattr(item, "originalname", item.name)
    return expected.get(item.name) or expected.get(function)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    stats = terminalreporter.stats
    counts = {key: len(stats.get(key, [])) for key in ("passed", "xfailed", "failed", "skipped")}
    collected = terminalreporter._numcollected
    terminalreporter.write_line(
        f"LangChain compatibility: {collected} collected, {counts['passed']} passed, "
        f"{counts['xfailed']} expected differences, {counts['failed']} failed, "
        f"{counts['skipped']} skipped"
    )
