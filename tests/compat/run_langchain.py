"""Run LangChain's own ``test_human_in_the_loop.py`` with ``SignoffMiddleware`` substituted.

``make test`` runs this after the main suite, from the repository root::

    python -m tests.compat.run_langchain [pytest args...]

It fetches the sdist of the installed langchain (cached in ``.cache/compat/``), extracts
the test file and the helpers it imports, and runs them in a separate pytest process whose
working directory is the extraction, so the sdist's ``tests`` package is on ``sys.path``
and ours is not. Tests listed in ``langchain_expected_differences.txt`` must fail (strict
xfail); any other failure fails the run. If the package index is unreachable the step is
skipped with one line saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.compat import langchain_sdist

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / ".cache" / "compat"
EXPECTED = HERE / "langchain_expected_differences.txt"

PYTEST_INI = """\
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def main(pytest_args: list[str]) -> int:
    version = langchain_sdist.installed_version()
    try:
        sdist = langchain_sdist.fetch(version, CACHE)
    except langchain_sdist.IndexUnreachable as error:
        print(f"LangChain compatibility suite skipped: package index unreachable: {error}")
        return 0
    root = langchain_sdist.extract(sdist, CACHE / f"langchain-{version}-tests")
    (root / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    print(f"LangChain compatibility: langchain {version}'s {langchain_sdist.TEST_FILE}")
    command = [
        sys.executable, "-m", "pytest", "-p", "pytest_asyncio.plugin",
        "-p", "signoff_compat_plugin", "-p", "no:cacheprovider",
        f"--expected-differences={EXPECTED}", "-q", "-rfEX",
        str(langchain_sdist.TEST_FILE), *pytest_args,
    ]  # fmt: skip
    env = {
        **os.environ,
        # for -p signoff_compat_plugin; the extraction (the working directory) stays first
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # only the plugins named above
    }
    return subprocess.run(command, cwd=root, env=env, stdin=subprocess.DEVNULL).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
