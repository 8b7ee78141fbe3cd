"""The package layering holds: no import cycle between signoff's packages.

The graph is built from the source (module-level, ``TYPE_CHECKING`` and function-level
imports alike), so a cycle cannot hide behind a lazy import.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import signoff

SRC = Path(signoff.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every signoff module ``path`` imports, wherever the import statement sits."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("signoff"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.startswith("signoff"):
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
    return found


def _package_of(module: str) -> str:
    """The layer a module belongs to: ``signoff.gate.core`` → ``gate``; top-level modules
    (``signoff.assemble``) are their own layer."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "signoff"


def package_graph() -> dict[str, set[str]]:
    modules = {_module_name(p) for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for path in SRC.rglob("*.py"):
        me = _package_of(_module_name(path))
        for target in _imports(path):
            if target not in modules:
                continue  # `from signoff.x import Name` also yields signoff.x.Name
            other = _package_of(target)
            if other != me and other != "signoff":
                graph[me].add(other)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle's node set, found by DFS from each node (the graph is small)."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                key = frozenset(path)
                if key not in seen:
                    seen.add(key)
                    found.append([*path, start])
            elif nxt not in path and nxt > start:
                walk(start, nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return found


def test_no_import_cycle_between_packages() -> None:
    cycles = _cycles(package_graph())
    assert not cycles, "import cycles between packages:\n" + "\n".join(
        " → ".join(c) for c in cycles
    )


def test_model_imports_nothing_of_signoff() -> None:
    assert not package_graph().get("model")


def test_gate_never_imports_channels_or_client() -> None:
    assert not package_graph()["gate"] & {"channels", "client", "server", "cli", "integrations"}


def test_every_registered_section_is_in_the_policy_reference() -> None:
    from signoff.policy.sections import SECTIONS

    doc = (Path(__file__).parents[1] / "docs" / "policy.md").read_text(encoding="utf-8")
    table = doc[doc.index("## Top-level keys") :].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines() if "|" in line}
    names = {s.name for s in SECTIONS}
    assert names <= rows, f"missing from docs/policy.md: {sorted(names - rows)}"
    assert not (rows - names - {"key", "---"}), "documented but not registered"


def test_unknown_top_level_key_lists_every_registered_section() -> None:
    import pytest

    from signoff.model import PolicyError
    from signoff.policy import Policy
    from signoff.policy.sections import SECTIONS

    with pytest.raises(PolicyError) as err:
        Policy.from_yaml("version: 1\nbogus: {}\n")
    for section in SECTIONS:
        assert section.name in str(err.value)


def test_gate_section_is_validated_by_policy_check_and_used_by_the_gate() -> None:
    from signoff import Gate, Policy
    from signoff.assemble import check_sections
    from signoff.store import MemoryStore

    bad = Policy.from_yaml("version: 1\ngate: {sweep_interval: soon}\n")
    errors, _ = check_sections(bad)
    assert errors and "gate.sweep_interval" in errors[0]
    good = Policy.from_yaml("version: 1\ngate: {sweep_interval: 0.25}\n")
    assert Gate(good, MemoryStore()).sweep_interval == 0.25
