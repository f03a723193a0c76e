"""Clean venvs and copies of the tree for the install tests: build and install outside the repository (no
build/ or egg-info left in it), from only the files a Dockerfile or a clone provides."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PROVIDER, WORKER = "airflow-kueue-provider", "airflow-kueue-provider-worker"
# What `pip install ./worker-package .` reads from a clone (the Airflow image copies the same).
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "README.pypi.md",
    "LICENSE",
    "airflow_kueue_provider",
    "worker-package",
)


def copy_tree(target: Path, sources: Sequence[str] = SOURCES) -> Path:
    """The named files and folders of the repository under ``target`` (links kept, caches left out)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in sources:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(
                source, target / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(source, target / name)
    return target


def run(
    cmd: Sequence[str | Path], cwd: Path, check: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """A command with a clean environment for Python (no PYTHONPATH, no repo on the path)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_NO", "VIRTUAL_ENV"))}
    done = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env={**environ, **env}, capture_output=True, text=True, timeout=600
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return done


def new_venv(path: Path, with_pip: bool = False) -> Path:
    """A venv of this interpreter's Python; its python. Without pip, install with ``pip_into``."""
    run([sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), path], cwd=path.parent)
    return path / "bin" / "python"


def pip_into(python: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """This interpreter's pip acting on another venv (``pip --python``: no pip needed there)."""
    return run([sys.executable, "-m", "pip", "--python", python, *args], cwd=python.parents[2])


def installed_files(python: Path, dist: str) -> set[str]:
    """The files ``pip show -f`` lists for ``dist`` in that venv, its ``.dist-info`` left out."""
    shown = pip_into(python, "show", "-f", dist).stdout.split("Files:", 1)[1]
    return {line.strip() for line in shown.splitlines() if line.strip() and ".dist-info/" not in line}
