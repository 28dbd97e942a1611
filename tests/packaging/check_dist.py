"""Install the wheels of ``dist/`` in a clean virtual environment and run every quick start.

``make dist-check`` (and ``.ci/run``) runs this after ``make dist``. It creates a new
virtual environment outside the repository, runs every ``pip install --find-links dist``
line of the READMEs as written (the registries bring the dependencies, ``dist/`` brings
tiermem and its integrations), then runs each README's quick start twice in an empty
directory of its own: both runs must succeed and print the same thing, and tiermem must
be imported from the environment, never from the repository.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READMES = [
    ROOT / "README.md",
    *sorted(ROOT.glob("integrations/*/README.md")),
]
INSTALL_LINE = re.compile(r"^\$ (pip install --find-links dist [^#\n]*)", re.MULTILINE)


def install_commands(readme: Path) -> list[list[str]]:
    """The README's ``pip install --find-links dist ...`` lines, as argument lists."""
    return [shlex.split(m.group(1)) for m in INSTALL_LINE.finditer(readme.read_text("utf-8"))]


def quick_start(readme: Path) -> str:
    """The first Python block after the README's "Quick start" heading."""
    section = readme.read_text(encoding="utf-8").split("## Quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    if match is None:
        raise SystemExit(f"{readme.relative_to(ROOT)}: no Python block under Quick start")
    return match.group(1)


def run(command: list[str], cwd: Path) -> str:
    """Run ``command`` in ``cwd`` and return its standard output; stop on failure."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=clean_env())
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"failed ({done.returncode}): {shlex.join(command)}")
    return done.stdout


def clean_env() -> dict[str, str]:
    """The environment without anything that would point Python at the repository."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}


def say(line: str) -> None:
    """Report progress on standard output at once."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    """Build the environment, install as the READMEs say and run every quick start."""
    dist = ROOT / "dist"
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != len(READMES):
        raise SystemExit(f"expected {len(READMES)} wheels in dist/ (make dist), found {wheels}")
    with tempfile.TemporaryDirectory(prefix="tiermem-dist-") as tmp:
        env_dir = Path(tmp) / "venv"
        venv.create(env_dir, with_pip=True)
        python = str(env_dir / "bin" / "python")
        commands: list[list[str]] = []
        for readme in READMES:
            commands += [cmd for cmd in install_commands(readme) if cmd not in commands]
        if len(commands) < len(READMES):
            raise SystemExit("every README needs a `pip install --find-links dist` line")
        for command in commands:
            say(f"$ {shlex.join(command)}")
            run([python, "-m", "pip", "install", "-q", *command[2:]], cwd=ROOT)
        where = run([python, "-c", "import tiermem; print(tiermem.__file__)"], cwd=Path(tmp))
        if not where.startswith(str(env_dir)):
            raise SystemExit(f"tiermem was imported from {where.strip()}, not the new environment")
        for readme in READMES:
            name = str(readme.relative_to(ROOT))
            workdir = Path(tmp) / name.replace("/", "_")
            workdir.mkdir()
            script = workdir / "quick_start.py"
            script.write_text(quick_start(readme), encoding="utf-8")
            outputs = [run([python, str(script)], cwd=workdir) for _ in range(2)]
            if outputs[0] != outputs[1] or not outputs[0].strip():
                raise SystemExit(f"{name}: the quick start printed {outputs!r}")
            say(f"{name}: quick start ok, the same output twice")
    say(f"{len(READMES)} passed, 0 failed")


if __name__ == "__main__":
    main()
