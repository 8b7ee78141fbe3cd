"""Line-aware YAML and error collection for the policy loader.

A policy error is only useful if it says *where*: ``signoff.yaml.tools.x.rules[0].when``
plus a line number. PyYAML's node tree knows every node's line, but the plain ``safe_load``
result forgets it, so we compose the node tree ourselves, build plain dicts and lists from it
and keep a side table ``path -> line``. Mappings handed in from Python simply have no lines.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import yaml

from signoff.model import PolicyError, PolicyErrors

PathKey = str | int
Path = tuple[PathKey, ...]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAX_NODES = 200_000  # guards against alias bombs ("billion laughs")


@dataclass(slots=True)
class Source:
    """Where loaded data came from: a display name (``signoff.yaml``) and the line table."""

    filename: str
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        while True:
            line = self.lines.get(path)
            if line is not None or not path:
                return line
            path = path[:-1]


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def key_path(dotted: str) -> Path:
    """``channels.webhooks[0].url`` (or ``channels.webhooks.0.url``) as a line-table path."""
    out: list[PathKey] = []
    for name, index in _SEGMENT.findall(dotted):
        if index:
            out.append(int(index))
        elif name.isdigit():
            out.append(int(name))
        else:
            out.append(name)
    return tuple(out)


def with_line(exc: PolicyError, src: Source | None) -> PolicyError:
    """``exc`` with the line of its key path in ``src`` (errors of runtime sections are
    raised by their owners, which see plain mappings: the policy's line table places them).
    An error that has a line, or whose path the file does not have, is returned as it is."""
    if isinstance(exc, PolicyErrors):
        located = [with_line(e, src) for e in exc.errors]
        if all(a is b for a, b in zip(located, exc.errors, strict=True)):
            return exc
        return PolicyErrors(located)
    if src is None or exc.line is not None or not exc.path or not src.lines:
        return exc
    dotted = exc.path
    for prefix in (src.filename + ".", "signoff.yaml."):  # some owners prefix a file name
        dotted = dotted.removeprefix(prefix)
    path = key_path(dotted)
    line = src.line_of(path) if path else None
    if line is None:
        return exc
    return PolicyError(exc.message, path=exc.path, line=line, file=exc.file or src.filename)


@dataclass(frozen=True, slots=True)
class Loc:
    """A position in the policy data: renders as ``signoff.yaml.tools.x.rules[0]``."""

    src: Source
    path: Path = ()

    def key(self, key: Hashable) -> Loc:
        return Loc(self.src, (*self.path, key if isinstance(key, str) else str(key)))

    def item(self, index: int) -> Loc:
        return Loc(self.src, (*self.path, index))

    @property
    def text(self) -> str:
        out = [self.src.filename]
        for part in self.path:
            out.append(f"[{part}]" if isinstance(part, int) else f".{part}")
        return "".join(out)

    @property
    def line(self) -> int | None:
        return self.src.line_of(self.path)

    def error(self, message: str) -> PolicyError:
        return PolicyError(message, path=self.text, line=self.line, file=self.src.filename)

    def describe(self, message: str) -> str:
        """``path (line N): message`` — the same shape as a PolicyError, for warnings."""
        return str(self.error(message))


def bool_hint(value: object) -> str:
    """A hint for the YAML 1.1 trap: ``no``, ``yes``, ``on``, ``off`` read as booleans."""
    return " (YAML reads yes/no/on/off as booleans: quote it)" if isinstance(value, bool) else ""


class LoadError(Exception):
    """A problem at ``loc``, raised inside a compile step and collected by the loader."""

    def __init__(self, loc: Loc, message: str) -> None:
        self.loc = loc
        self.message = message
        super().__init__(message)


class Problems:
    """Collects every load error (deduplicated) so one run reports them all."""

    def __init__(self) -> None:
        self.errors: list[PolicyError] = []
        self.warnings: list[str] = []
        self._seen: set[str] = set()

    def add(self, loc: Loc, message: str) -> None:
        self.add_policy_error(loc.error(message))

    def add_policy_error(self, err: PolicyError) -> None:
        if str(err) not in self._seen:
            self._seen.add(str(err))
            self.errors.append(err)

    def add_error(self, exc: LoadError) -> None:
        self.add(exc.loc, exc.message)

    def warn(self, loc: Loc, message: str) -> None:
        text = loc.describe(message)
        if text not in self.warnings:
            self.warnings.append(text)

    def raise_if_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise PolicyErrors(self.errors)


def parse_yaml(text: str, filename: str) -> tuple[Any, Source]:
    """Parse one YAML document into plain data plus a ``path -> line`` table (1-based)."""
    src = Source(filename)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, src
        builder = _Builder(loader, src)
        return builder.build(node, ()), src
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.problem and exc.context and exc.context_mark is not None:
            problem += f" ({exc.context} that starts on line {exc.context_mark.line + 1})"
        raise PolicyError(
            f"YAML syntax error: {problem}; fix the YAML (indentation, quotes, brackets) "
            "near this line",
            path=filename,
            line=line,
            file=filename,
        ) from None
    except yaml.YAMLError as exc:
        raise PolicyError(f"YAML error: {exc}", path=filename, file=filename) from None
    finally:
        loader.dispose()


class _Builder:
    """Turns a composed node tree into dicts/lists/scalars, recording lines as it goes."""

    def __init__(self, loader: Any, src: Source) -> None:
        self.loader = loader
        self.src = src
        self.count = 0
        self.active: set[int] = set()

    def build(self, node: Any, path: Path) -> Any:
        self.count += 1
        if self.count > _MAX_NODES:
            raise self._error(node, path, f"document too large (more than {_MAX_NODES} nodes)")
        if isinstance(node, yaml.ScalarNode):
            return self.loader.construct_object(node, deep=True)
        if id(node) in self.active:
            raise self._error(node, path, "recursive YAML alias; a policy cannot refer to itself")
        self.active.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return self._sequence(node, path)
            return self._mapping(node, path)
        finally:
            self.active.discard(id(node))

    def _sequence(self, node: Any, path: Path) -> list[Any]:
        if node.tag != _SEQ_TAG:
            raise self._error(node, path, f"unsupported YAML tag {node.tag!r}; use a plain list")
        out: list[Any] = []
        for i, child in enumerate(node.value):
            self.src.lines[(*path, i)] = child.start_mark.line + 1
            out.append(self.build(child, (*path, i)))
        return out

    def _mapping(self, node: Any, path: Path) -> dict[Any, Any]:
        if node.tag != _MAP_TAG:
            raise self._error(node, path, f"unsupported YAML tag {node.tag!r}; use a plain mapping")
        self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise self._error(key_node, path, "a mapping key must be a plain value")
            key = self.loader.construct_object(key_node, deep=True)
            if key in out:
                raise self._error(
                    key_node,
                    (*path, str(key)),
                    f"duplicate key {key!r}; each key may appear once per mapping",
                )
            child = (*path, key if isinstance(key, str) else str(key))
            self.src.lines[child] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, child)
        return out

    def _error(self, node: Any, path: Path, message: str) -> PolicyError:
        return PolicyError(
            message,
            path=Loc(self.src, path).text,
            line=node.start_mark.line + 1,
            file=self.src.filename,
        )
