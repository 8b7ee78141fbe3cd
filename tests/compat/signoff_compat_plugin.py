"""pytest plugin for running LangChain's HumanInTheLoopMiddleware tests against signoff.

Loaded by ``run_langchain.py`` into a separate pytest process (``-p signoff_compat_plugin``).
Once the test modules are imported it rebinds ``HumanInTheLoopMiddleware`` in their
namespaces to ``SignoffMiddleware`` — only there: LangChain's own module keeps its class,
which is what ``SignoffMiddleware`` subclasses. Each test named in the expected-differences
file is marked ``xfail(strict=True)``, so a listed test that starts passing fails the run,
and so does a listed name that matches no test.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from langchain.agents.middleware.human_in_the_loop import HumanInTheLoopMiddleware

from signoff.integrations.langchain import SignoffMiddleware

_SECTION = re.compile(r"^\[(?P<category>[^\]]+)\]$")
_ENTRY = re.compile(r"^(?P<test>test_\S+?)\s+--\s+(?P<reason>\S.*)$")


@dataclass(frozen=True)
class ExpectedDifference:
    test: str  # a test function's name (all its parameters) or one parametrized id
    category: str
    reason: str


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
            continue
        entry = _ENTRY.match(line)
        if entry is None:
            raise ValueError(f"{source}:{number}: expected `test_name -- reason`, got {line!r}")
        if not category:
            raise ValueError(f"{source}:{number}: {entry['test']} is listed before any [category]")
        entries.append(ExpectedDifference(entry["test"], category, entry["reason"]))
    twice = [name for name, n in Counter(e.test for e in entries).items() if n > 1]
    if twice:
        raise ValueError(f"{source}: listed more than once: {', '.join(sorted(twice))}")
    return entries


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
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
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
