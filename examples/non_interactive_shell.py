"""A run where nobody can answer, with the deepagents preset — runnable on its own.

    python examples/non_interactive_shell.py

It writes `signoff init --preset deepagents` into a temporary directory and starts the gate
non-interactive (as `SIGNOFF_NON_INTERACTIVE=1` would). Its `execute` tool runs real shell
commands there: those made only of allow-listed read-only commands run at once; anything
else, and the file write, is refused at once with the reason the agent would read. Nothing
waits, and every step is audited.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from signoff import Gate, Policy, Rejected
from signoff.cli.main import Preset, preset_text


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="signoff-example-"))
    (workdir / "notes.txt").write_text("keep me\n")
    config = workdir / "signoff.yaml"
    config.write_text(preset_text(Preset.deepagents))  # the store lands next to it
    gate = Gate(Policy.load(config), interactive=False)

    @gate.guard
    def execute(command: str) -> str:
        done = subprocess.run(  # only after the gate approved this exact command
            command, shell=True, cwd=workdir, capture_output=True, text=True, check=False
        )
        return done.stdout.strip()

    @gate.guard
    def write_file(file_path: str, content: str) -> str:
        (workdir / file_path).write_text(content)
        return f"wrote {file_path}"

    attempts = [
        (execute, {"command": "ls && cat notes.txt | wc -l"}),
        (execute, {"command": "rm notes.txt"}),
        (execute, {"command": "cat notes.txt > copy.txt"}),
        (write_file, {"file_path": "new.txt", "content": "x"}),
    ]
    try:
        for tool, args in attempts:
            try:
                print(f"ran {args}: {tool(**args)!r}")
            except Rejected as exc:
                print(f"refused {args}: {exc}")
        print("files:", sorted(p.name for p in workdir.iterdir() if p.suffix == ".txt"))
    finally:
        gate.close()


if __name__ == "__main__":
    main()
