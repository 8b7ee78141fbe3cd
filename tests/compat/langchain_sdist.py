"""LangChain's own test file, from the sdist of the langchain version installed here.

The sdist is fetched once with ``pip download`` into ``.cache/compat/`` (git-ignored) and
kept there; each run extracts only the test file and the modules of the sdist's ``tests``
package that it imports (its model fakes), so nothing else of LangChain's test tree — its
conftests, cassettes, fixtures needing Docker — is on the path. The version is the installed
one, never a second pin: the tests then describe the code they run against.
"""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

TEST_FILE = PurePosixPath(
    "tests/unit_tests/agents/middleware/implementations/test_human_in_the_loop.py"
)

# What pip prints when it cannot reach the index...
_CONNECTION_ERRORS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "Could not fetch URL",
)
# ...and when no index it reached serves any langchain sdist (an offline mirror of wheels).
_NOTHING_SERVED = "(from versions: none)"


class IndexUnreachable(Exception):
    """The package index could not serve the sdist; the compatibility run is skipped."""


def installed_version() -> str:
    return importlib.metadata.version("langchain")


def fetch(version: str, cache: Path) -> Path:
    """The cached sdist of ``langchain==version``, downloaded with pip on first use."""
    sdist = cache / f"langchain-{version}.tar.gz"
    if sdist.is_file():
        return sdist
    cache.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
        "--timeout", "30", "--retries", "2", f"langchain=={version}", "-d", str(cache),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        if any(marker in output for marker in (*_CONNECTION_ERRORS, _NOTHING_SERVED)):
            raise IndexUnreachable(_reason(output))
        raise RuntimeError(f"pip download of langchain=={version} failed:\n{output}")
    if not sdist.is_file():
        raise RuntimeError(f"pip download did not produce {sdist.name}:\n{output}")
    return sdist


def extract(sdist: Path, into: Path) -> Path:
    """Extract the test file and the ``tests`` modules it needs; returns the new root."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        top = PurePosixPath(archive.getnames()[0]).parts[0]
        members = {PurePosixPath(name).relative_to(top) for name in archive.getnames()}
        sources: dict[PurePosixPath, str] = {}
        pending = [TEST_FILE]
        while pending:
            path = pending.pop()
            if path not in sources:
                sources[path] = _read(archive, top / path)
                for module, required in _imported_test_modules(sources[path]):
                    try:
                        found = _module_file(module, members)
                    except LookupError:
                        if required:
                            raise RuntimeError(
                                f"{path} imports {module}, which is not in the sdist"
                            ) from None
                        continue
                    if found is not None:
                        pending.append(found)
    for path in list(sources):  # every package on the way needs its __init__.py
        for package in path.parents[:-1]:
            init = package / "__init__.py"
            sources.setdefault(init, "")
    for path, text in sources.items():
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return into


def _read(archive: tarfile.TarFile, name: PurePosixPath) -> str:
    member = archive.extractfile(str(name))
    if member is None:
        raise RuntimeError(f"{name} is not a file in the sdist")
    return member.read().decode("utf-8")


def _imported_test_modules(source: str) -> list[tuple[str, bool]]:
    """The modules of the sdist's ``tests`` package that ``source`` imports, each with
    whether it must exist: in ``from tests.a import b``, ``b`` may be a name, not a module."""
    found: list[tuple[str, bool]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, True))
            found.extend((f"{node.module}.{alias.name}", False) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, True) for alias in node.names)
    return [(name, required) for name, required in found if name.startswith("tests.")]


def _module_file(module: str, members: set[PurePosixPath]) -> PurePosixPath | None:
    """The file defining ``module``; None for a directory without ``__init__.py``."""
    base = PurePosixPath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate in members:
            return candidate
    if any(base in member.parents for member in members):
        return None
    raise LookupError(module)


def _reason(output: str) -> str:
    """pip's most telling line: the connection error if it printed one, else its error."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    telling = [line for line in lines if any(m in line for m in _CONNECTION_ERRORS)]
    telling += [line for line in lines if line.startswith("ERROR")] + lines[-1:]
    line = telling[0] if telling else "pip printed nothing"
    return line if len(line) <= 200 else line[:197] + "..."
