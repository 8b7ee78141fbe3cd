"""The harness that runs LangChain's HITL tests against SignoffMiddleware: its list of expected
differences stays well-formed and points at real tests, the sdist extraction takes only what
the test file imports, and an unreachable package index skips the run with one line."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest

from tests.compat import langchain_sdist, run_langchain
from tests.compat.signoff_compat_plugin import FAILS_WITH, parse_expected_differences

OURS = Path(__file__).resolve().parents[1] / "integrations" / "langchain"


def listed() -> list[str]:
    text = run_langchain.EXPECTED.read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.startswith("test_")]


def test_every_expected_difference_has_a_category_and_a_reason() -> None:
    entries = parse_expected_differences(run_langchain.EXPECTED.read_text(encoding="utf-8"))
    assert len(entries) == len(listed()) > 0
    assert {e.fails_with for e in entries} == set(FAILS_WITH.values())  # every category used
    for entry in entries:
        assert len(entry.reason) > 20, entry


def test_every_end_to_end_test_named_in_the_list_exists() -> None:
    named = [ref for line in listed() for ref in re.findall(r"(\w+)::(test_\w+)", line)]
    assert named
    for module, test in set(named):
        path = OURS / f"{'test_compat_ported' if module == 'compat' else module}.py"
        assert f"def {test}(" in path.read_text(encoding="utf-8"), (module, test)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("test_a -- no category yet", "2: test_a is listed before any [category]"),
        ("[edits that switch tools]\ntest_a no separator", "3: expected `test_name -- reason`"),
        ("[edits that switch tools]\ntest_a -- x\ntest_a -- y", "listed more than once: test_a"),
        ("[whitebox]\ntest_a -- typo in the category", "2: unknown category 'whitebox'"),
    ],
)
def test_a_malformed_list_is_refused_with_its_line(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_expected_differences("# header\n" + text, "list.txt")


def _sdist(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode("utf-8")
            member = tarfile.TarInfo(f"langchain-0.0.1/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return path


def test_extraction_takes_the_test_file_and_the_helpers_it_imports(tmp_path: Path) -> None:
    test_file = str(langchain_sdist.TEST_FILE)
    sdist = _sdist(
        tmp_path / "langchain-0.0.1.tar.gz",
        {
            test_file: "from tests.unit_tests.agents.model import Fake\nimport tests.helpers\n"
            "from tests.unit_tests import anystr\n",
            "tests/unit_tests/anystr.py": "",
            "tests/unit_tests/agents/model.py": "from tests.unit_tests.agents.fakes import X\n",
            "tests/unit_tests/agents/fakes.py": "X = 1\n",
            "tests/helpers/__init__.py": "H = 1\n",
            "tests/unit_tests/conftest.py": "import blockbuster\n",
            "tests/unit_tests/agents/unrelated.py": "",
        },
    )
    root = langchain_sdist.extract(sdist, tmp_path / "out")
    got = sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))
    packages = ["tests/unit_tests/agents/middleware/implementations", "tests/unit_tests/agents"]
    assert got == sorted(
        [
            test_file,
            "tests/unit_tests/agents/model.py",
            "tests/unit_tests/agents/fakes.py",
            "tests/unit_tests/anystr.py",
            "tests/helpers/__init__.py",
            "tests/__init__.py",
            "tests/unit_tests/__init__.py",
            "tests/unit_tests/agents/middleware/__init__.py",
            *(f"{p}/__init__.py" for p in packages),
        ]
    )


def test_extraction_names_a_helper_missing_from_the_sdist(tmp_path: Path) -> None:
    test_file = str(langchain_sdist.TEST_FILE)
    sdist = _sdist(tmp_path / "s.tar.gz", {test_file: "from tests.gone import X\n"})
    with pytest.raises(RuntimeError, match=r"\.py imports tests\.gone, which is not in the sdist"):
        langchain_sdist.extract(sdist, tmp_path / "out")


@pytest.fixture
def unreachable_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip pointed at a closed loopback port, with no config file or local wheels."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)


@pytest.mark.usefixtures("unreachable_index")
def test_an_unreachable_index_skips_the_run_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run_langchain, "CACHE", tmp_path)
    assert run_langchain.main([]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("LangChain compatibility suite skipped: package index unreachable:")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("unreachable_index")
def test_a_cached_sdist_is_used_without_asking_the_index(tmp_path: Path) -> None:
    cached = tmp_path / "langchain-9.9.9.tar.gz"
    cached.write_bytes(b"cached")
    assert langchain_sdist.fetch("9.9.9", tmp_path) == cached
