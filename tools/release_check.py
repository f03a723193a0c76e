#!/usr/bin/env python3
"""``make release-check``: whether this tree could be released as it is, and if not, each missing item and
its fix (docs/release.md).

A release is the provider's sdist and wheel and the worker package's wheel at one version, tagged
``v<version>``. This checks, without publishing anything:

1. the version is written once (``airflow_kueue_provider/__init__.py``) and both pyprojects read it there;
2. CHANGELOG.md has a section for that version (Keep a Changelog: ``## [X.Y.Z] - YYYY-MM-DD``);
3. the tag ``v<version>`` is free, or already names HEAD;
4. both pyprojects have ``[project.urls]`` (absolute addresses: the repository has none yet, and this tool
   never makes one up);
5. ``make dist``'s build and checks (tools/check_dist.py --no-install: metadata, ``twine check --strict``)
   pass, and the artifacts in ``dist/`` are complete and own disjoint files.

Prints "releasable" and exits 0, or "not releasable" with the list and exits 1. ``--no-build`` checks the
``dist/`` already there instead of running tools/check_dist.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

import check_dist  # noqa: E402

REPO = TOOLS.parent
VERSION_FILE = "airflow_kueue_provider/__init__.py"
PEP440 = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")


@dataclass(frozen=True)
class Blocker:
    """One reason the tree is not releasable, and what to do about it."""

    item: str
    fix: str


def _toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


def version_blockers(repo: Path) -> list[Blocker]:
    """The version has one home; both distributions read it from there."""
    lines = re.findall(r'^__version__ = "([^"]+)"$', (repo / VERSION_FILE).read_text(), flags=re.MULTILINE)
    if len(lines) != 1 or not PEP440.fullmatch(lines[0]):
        return [
            Blocker(
                f"{VERSION_FILE} has {len(lines)} PEP 440 __version__ lines",
                'write one: __version__ = "X.Y.Z"',
            )
        ]
    found = []
    provider = _toml(repo / "pyproject.toml")
    if "version" in provider["project"] or "version" not in provider["project"].get("dynamic", []):
        found.append(
            Blocker("pyproject.toml states a version", f'read it from {VERSION_FILE}: dynamic = ["version"]')
        )
    attr = provider.get("tool", {}).get("setuptools", {}).get("dynamic", {}).get("version")
    if attr != {"attr": "airflow_kueue_provider.__version__"}:
        found.append(
            Blocker(
                "pyproject.toml reads its version elsewhere",
                '[tool.setuptools.dynamic] version = { attr = "airflow_kueue_provider.__version__" }',
            )
        )
    worker = _toml(repo / "worker-package" / "pyproject.toml")
    source = worker.get("tool", {}).get("hatch", {}).get("version", {}).get("path")
    if "version" in worker["project"] or source != f"../{VERSION_FILE}":
        found.append(
            Blocker(
                "worker-package/pyproject.toml has a version of its own",
                f'[tool.hatch.version] path = "../{VERSION_FILE}", no [project] version',
            )
        )
    return found


def changelog_blockers(repo: Path, version: str) -> list[Blocker]:
    text = (repo / "CHANGELOG.md").read_text()
    if re.search(rf"^## \[{re.escape(version)}\]( - \d{{4}}-\d{{2}}-\d{{2}})?\s*$", text, flags=re.MULTILINE):
        return []
    return [
        Blocker(
            f'CHANGELOG.md has no "## [{version}]" section',
            f'move the Unreleased notes under "## [{version}] - <release date>" and open an empty '
            '"## [Unreleased]" above it',
        )
    ]


def tag_blockers(repo: Path, tag: str) -> list[Blocker]:
    """The tag is free or names HEAD already (no git here: nothing to say)."""

    def rev(ref: str) -> str | None:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"{ref}^{{commit}}"],
            capture_output=True,
            text=True,
        )
        return done.stdout.strip() if done.returncode == 0 else None

    at, head = rev(tag), rev("HEAD")
    if at is None or at == head:
        return []
    return [
        Blocker(
            f"the tag {tag} already names {at[:12]}, not HEAD",
            f"raise __version__ in {VERSION_FILE} (and its CHANGELOG section)",
        )
    ]


def url_blockers(repo: Path) -> list[Blocker]:
    found = []
    for pyproject in ("pyproject.toml", "worker-package/pyproject.toml"):
        urls = _toml(repo / pyproject)["project"].get("urls", {})
        bad = [name for name, url in urls.items() if not str(url).startswith("https://")]
        if not urls or bad:
            found.append(
                Blocker(
                    f"{pyproject} has no [project.urls]"
                    if not urls
                    else f"{pyproject}: [project.urls] {', '.join(bad)} not absolute https",
                    "add Homepage, Source, Changelog and Documentation (absolute https addresses) "
                    "once the repository and the docs have public ones",
                )
            )
    return found


def dist_blockers(dist: Path, version: str) -> list[Blocker]:
    """The artifacts ``make dist`` leaves: one of each, complete, with no file in both wheels."""
    names = {
        "provider wheel": f"{check_dist.PROVIDER.replace('-', '_')}-{version}-py3-none-any.whl",
        "provider sdist": f"{check_dist.PROVIDER.replace('-', '_')}-{version}.tar.gz",
        "worker wheel": f"{check_dist.WORKER.replace('-', '_')}-{version}-py3-none-any.whl",
    }
    missing = [what for what, name in names.items() if not (dist / name).is_file()]
    if missing:
        return [Blocker(f"dist/ lacks the {', '.join(missing)} of {version}", "make dist")]
    problems = check_dist.dist_problems(dist / names["provider wheel"], dist / names["worker wheel"], version)
    return [
        Blocker(problem, "fix the packaging (pyproject.toml, worker-package/), then make dist")
        for problem in problems
    ]


def blockers(repo: Path, dist: Path, build_ok: bool = True) -> list[Blocker]:
    found = version_blockers(repo)
    if found:
        return found
    version = check_dist.package_version(repo)
    found += changelog_blockers(repo, version) + tag_blockers(repo, f"v{version}") + url_blockers(repo)
    if not build_ok:
        found.append(Blocker("make dist's build or twine check --strict failed", "see its output above"))
    return found + dist_blockers(dist, version)


def report(version: str, found: list[Blocker]) -> str:
    head = f"airflow-kueue-provider and airflow-kueue-provider-worker {version}, tag v{version}: "
    if not found:
        return head + "releasable"
    lines = [f"  - {b.item}.\n    Fix: {b.fix}." for b in found]
    return head + f"not releasable ({len(found)} items)\n" + "\n".join(lines)


def main(argv: list[str]) -> int:
    build_ok = True
    if "--no-build" not in argv:
        build_ok = (
            subprocess.run([sys.executable, str(TOOLS / "check_dist.py"), "--no-install"]).returncode == 0
        )
    found = blockers(REPO, check_dist.DIST, build_ok)
    version = check_dist.package_version(REPO)
    print(report(version, found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
