#!/usr/bin/env python3
"""``make dist``: build the release artifacts into ``dist/`` and prove they install.

1. ``python -m build``: the provider's sdist, then its wheel built from that sdist (so the sdist is complete),
   and the worker package's wheel (``worker-package/``; wheel only: it is made of this tree's files, which an
   sdist of that directory could not carry).
2. Each wheel's metadata: the name, the version ``airflow_kueue_provider.__version__`` says, ``py.typed``, the
   provider's entry points and its pin of the worker package at that version, no ``dev`` extra; and no
   installed file in both wheels (one owner per file: uninstalling one never breaks the other).
3. ``twine check --strict dist/*``. A failure about the long description (README.md) is named as such.
4. A clean venv (python3.11, recreated each run in ~/.cache/airflow-kueue-provider/venv-dist) installs both
   wheels with their dependencies from the package index, and ``airflow providers list`` (AIRFLOW_HOME a
   temporary directory, run outside the repository) must list ``airflow-kueue-provider`` at that version.

Needs python3.11 and the package index, nothing else: ``build`` and ``twine`` live in a tool venv of their own
(~/.cache/airflow-kueue-provider/venv-dist-tools), never in the project's .venv. ``PYTHON`` overrides the
interpreter, ``AIRFLOW_KUEUE_CACHE`` the cache directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from email.parser import Parser
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DIST = REPO / "dist"
PROVIDER = "airflow-kueue-provider"
WORKER = "airflow-kueue-provider-worker"
TOOLS = ("pip>=25.1", "build>=1.2", "twine>=6.1")
PROVIDER_ENTRY_POINTS = ("[apache_airflow_provider]", "[airflow.plugins]")
WORKER_PACKAGES = ("worker", "kueue", "storage")  # what the worker wheel owns under airflow_kueue_provider/


def package_version(repo: Path = REPO) -> str:
    """``__version__`` as written in the package (read, not imported: the package needs Airflow)."""
    source = (repo / "airflow_kueue_provider" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', source, flags=re.MULTILINE)
    if found is None:
        raise SystemExit('airflow_kueue_provider/__init__.py has no __version__ = "..." line')
    return found[1]


def wheel_files(wheel: Path) -> set[str]:
    """The files a wheel installs, its ``.dist-info`` left out (each distribution has its own)."""
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist() if not n.endswith("/") and ".dist-info/" not in n}


def shared_files(first: Path, second: Path) -> list[str]:
    """The files both wheels install: uninstalling either would delete them from under the other."""
    return sorted(wheel_files(first) & wheel_files(second))


def wheel_problems(
    wheel: Path, name: str, version: str, required: Sequence[str] = (), requires: Sequence[str] = ()
) -> list[str]:
    """What is wrong with a built wheel: its name or version, a file it lacks, an extra it must not have, a
    ``Requires-Dist`` it lacks (``requires``: exact lines, such as the worker package's pin)."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata_files = [n for n in names if n.endswith(".dist-info/METADATA")]
        if len(metadata_files) != 1:
            return [f"{wheel.name}: {len(metadata_files)} METADATA files"]
        meta = Parser().parsestr(archive.read(metadata_files[0]).decode())
        entry_points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_text = archive.read(entry_points[0]).decode() if entry_points else ""
    problems = []
    if meta["Name"] != name:
        problems.append(f"{wheel.name}: Name {meta['Name']!r}, expected {name!r}")
    if meta["Version"] != version:
        problems.append(f"{wheel.name}: Version {meta['Version']!r}, but __version__ is {version!r}")
    if "dev" in (meta.get_all("Provides-Extra") or []):
        problems.append(f"{wheel.name}: a 'dev' extra (the development tools are a dependency group)")
    declared = meta.get_all("Requires-Dist") or []
    problems += [f"{wheel.name}: no Requires-Dist {wanted}" for wanted in requires if wanted not in declared]
    for path in required:
        if path.endswith("]"):  # "[section]" of entry_points.txt
            if path not in entry_text:
                problems.append(f"{wheel.name}: no {path} entry point")
        elif path not in names:
            problems.append(f"{wheel.name}: {path} is missing")
    return problems


def dist_problems(provider: Path, worker: Path, version: str) -> list[str]:
    """Both wheels checked together: what each must carry and say, and that no file is in both."""
    problems = wheel_problems(
        provider,
        PROVIDER,
        version,
        ["airflow_kueue_provider/__init__.py", "airflow_kueue_provider/py.typed", *PROVIDER_ENTRY_POINTS],
        [f"{WORKER}=={version}"],
    ) + wheel_problems(
        worker,
        WORKER,
        version,
        [
            f"airflow_kueue_provider/{package}/{file}"
            for package in WORKER_PACKAGES
            for file in ("__init__.py", "py.typed")
        ],
    )
    shared = shared_files(provider, worker)
    if shared:
        listed = ", ".join(shared[:5]) + (f" and {len(shared) - 5} more" if len(shared) > 5 else "")
        problems.append(f"both wheels install {listed}: give each file one owner")
    return problems


def long_description_trouble(twine_output: str) -> bool:
    """Whether ``twine check`` complains about the long description (the README) rather than the rest."""
    return bool(re.search(r"long_description|long description|readme", twine_output, flags=re.IGNORECASE))


def run(cmd: Sequence[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run([str(c) for c in cmd], check=True, text=True, **kwargs)


def venv(path: Path, python: str, fresh: bool) -> Path:
    if fresh and path.exists():
        shutil.rmtree(path)
    if not (path / "bin" / "python").exists():
        run([python, "-m", "venv", path])
    return path / "bin" / "python"


def main() -> int:
    python = os.environ.get("PYTHON", "python3.11")
    cache = Path(os.environ.get("AIRFLOW_KUEUE_CACHE", Path.home() / ".cache" / "airflow-kueue-provider"))
    version = package_version()
    print(f"== {PROVIDER} {version}: build, check and install the release artifacts")

    tools = venv(cache / "venv-dist-tools", python, fresh=False)
    run([tools, "-m", "pip", "install", "-q", "--upgrade", *TOOLS])

    # 1. Build.
    for leftover in (DIST, REPO / "build"):
        shutil.rmtree(leftover, ignore_errors=True)
    run([tools, "-m", "build", "--outdir", DIST, REPO])  # the sdist, then the wheel from it
    run([tools, "-m", "build", "--wheel", "--outdir", DIST, REPO / "worker-package"])
    for by_product in (REPO / "build", REPO / "airflow_kueue_provider.egg-info"):  # the sdist's egg_info
        shutil.rmtree(by_product, ignore_errors=True)
    wheels = {
        dist: sorted(DIST.glob(f"{dist.replace('-', '_')}-{version}-*.whl")) for dist in (PROVIDER, WORKER)
    }
    sdists = sorted(DIST.glob(f"{PROVIDER.replace('-', '_')}-{version}.tar.gz"))
    built = sorted(p.name for p in DIST.iterdir())
    print("built:", ", ".join(built))
    if any(len(found) != 1 for found in wheels.values()) or len(sdists) != 1:
        print(f"expected one sdist and one wheel of each distribution at {version}, got: {built}")
        return 1

    # 2. What the wheels say and carry.
    problems = dist_problems(wheels[PROVIDER][0], wheels[WORKER][0], version)
    if problems:
        print("the wheels are wrong:\n  " + "\n  ".join(problems))
        return 1
    print(f"metadata: both wheels are {version}, ship py.typed, have no dev extra, share no file")

    # 3. twine check --strict, one artifact at a time so a failure names its long description.
    failed = []
    for artifact in sorted(DIST.iterdir()):
        check = subprocess.run(
            [str(tools), "-m", "twine", "check", "--strict", str(artifact)], text=True, capture_output=True
        )
        print(check.stdout + check.stderr, end="")
        if check.returncode != 0:
            readme = (
                "worker-package/README.md"
                if artifact.name.startswith(WORKER.replace("-", "_"))
                else "README.md"
            )
            failed.append(
                f"{artifact.name}: "
                + (
                    f"its long description ({readme}) is what PyPI would refuse or not render"
                    if long_description_trouble(check.stdout + check.stderr)
                    else "see twine's output above"
                )
            )
    if failed:
        print("twine check --strict FAILED:\n  " + "\n  ".join(failed))
        return 1
    print(f"twine check --strict: {len(built)} artifacts PASSED")

    # 4. A clean venv installs the wheel from the index; Airflow lists the provider. (`make test` skips it,
    # --no-install: its min-airflow lane installs the wheel with every floor dependency and imports it.)
    if "--no-install" in sys.argv[1:]:
        print(f"== dist/ holds {', '.join(built)}: built and checked (not installed: --no-install)")
        return 0
    target = venv(cache / "venv-dist", python, fresh=True)
    run([target, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    run([target, "-m", "pip", "install", "-q", wheels[WORKER][0], wheels[PROVIDER][0]])
    with tempfile.TemporaryDirectory(prefix="airflow-home-") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON"))}
        env |= {"AIRFLOW_HOME": home, "PATH": f"{target.parent}{os.pathsep}{env.get('PATH', '')}"}
        where = run(
            [target, "-c", "import airflow_kueue_provider as p; print(p.__file__)"],
            cwd=home,
            env=env,
            capture_output=True,
        ).stdout.strip()
        if "/site-packages/" not in where:
            print(f"the provider was imported from {where}, not from the installed wheel")
            return 1
        listed = run(
            [target.parent / "airflow", "providers", "list"], cwd=home, env=env, capture_output=True
        ).stdout
    lines = [line for line in listed.splitlines() if PROVIDER in line.split()]
    if not lines or version not in lines[0]:
        print(f"`airflow providers list` does not list {PROVIDER} {version}:\n{listed}")
        return 1
    print(f"airflow providers list: {lines[0].strip()}")
    print(f"== dist/ holds {', '.join(built)}: checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
