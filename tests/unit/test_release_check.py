"""``make release-check`` (tools/release_check.py): a releasable tree passes; each missing item is named with
its fix; the real tree's honest list (no released CHANGELOG section, no public address) is what it says."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

import airflow_kueue_provider
from tests.tool_modules import load_tool

release_check = load_tool("release_check")
REPO = Path(__file__).resolve().parents[2]
VERSION = "1.2.3"
URLS = '[project.urls]\nSource = "https://example.org/src"\n'


def write_wheel(
    path: Path, name: str, version: str, files: list[str], requires: tuple[str, ...] = ()
) -> None:
    meta = f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{info}/METADATA", meta)
        archive.writestr(f"{info}/entry_points.txt", "[apache_airflow_provider]\n[airflow.plugins]\n")
        for file in files:
            archive.writestr(file, "")


def make_dist(dist: Path, provider_extra: tuple[str, ...] = (), version: str = VERSION) -> Path:
    """What make dist leaves, as far as release_check reads it (twine's part is check_dist's)."""
    dist.mkdir(parents=True, exist_ok=True)
    top = "airflow_kueue_provider"
    write_wheel(
        dist / f"airflow_kueue_provider-{version}-py3-none-any.whl",
        "airflow-kueue-provider",
        version,
        [f"{top}/__init__.py", f"{top}/py.typed", f"{top}/hooks/__init__.py", *provider_extra],
        (f"airflow-kueue-provider-worker=={version}",),
    )
    worker = [f"{top}/{p}/{f}" for p in ("worker", "kueue", "storage") for f in ("__init__.py", "py.typed")]
    write_wheel(
        dist / f"airflow_kueue_provider_worker-{version}-py3-none-any.whl",
        "airflow-kueue-provider-worker",
        version,
        worker,
    )
    (dist / f"airflow_kueue_provider-{version}.tar.gz").write_bytes(b"")
    return dist


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A releasable tree: the version once, its CHANGELOG section, URLs in both pyprojects."""
    repo = tmp_path / "repo"
    (repo / "airflow_kueue_provider").mkdir(parents=True)
    (repo / "worker-package").mkdir()
    (repo / "airflow_kueue_provider" / "__init__.py").write_text(f'__version__ = "{VERSION}"\n')
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "airflow-kueue-provider"\ndynamic = ["version", "dependencies"]\n'
        + URLS
        + '[tool.setuptools.dynamic]\nversion = { attr = "airflow_kueue_provider.__version__" }\n'
    )
    (repo / "worker-package" / "pyproject.toml").write_text(
        '[project]\nname = "airflow-kueue-provider-worker"\ndynamic = ["version"]\n'
        + URLS
        + '[tool.hatch.version]\npath = "../airflow_kueue_provider/__init__.py"\n'
    )
    (repo / "CHANGELOG.md").write_text(
        f"# Changelog\n\n## [Unreleased]\n\n## [{VERSION}] - 2026-12-05\n\n- x\n"
    )
    return repo


def items(found: list[Any]) -> list[str]:
    return [b.item for b in found]


def test_a_releasable_tree_passes(tree: Path, tmp_path: Path) -> None:
    found = release_check.blockers(tree, make_dist(tmp_path / "dist"))
    assert found == []
    assert release_check.report(VERSION, found).endswith(f"{VERSION}, tag v{VERSION}: releasable")


def test_each_missing_item_is_named_with_its_fix(tree: Path, tmp_path: Path) -> None:
    (tree / "CHANGELOG.md").write_text("# Changelog\n\n## [Unreleased]\n")
    (tree / "pyproject.toml").write_text((tree / "pyproject.toml").read_text().replace(URLS, ""))
    found = release_check.blockers(
        tree, make_dist(tmp_path / "dist", ("airflow_kueue_provider/worker/__init__.py",))
    )
    assert items(found) == [
        f'CHANGELOG.md has no "## [{VERSION}]" section',
        "pyproject.toml has no [project.urls]",
        "both wheels install airflow_kueue_provider/worker/__init__.py: give each file one owner",
    ]
    text = release_check.report(VERSION, found)
    assert "not releasable (3 items)" in text and text.count("Fix: ") == 3


def test_missing_artifacts_and_a_second_version_are_blockers(tree: Path, tmp_path: Path) -> None:
    assert items(release_check.blockers(tree, tmp_path / "empty")) == [
        f"dist/ lacks the provider wheel, provider sdist, worker wheel of {VERSION}"
    ]
    (tree / "worker-package" / "pyproject.toml").write_text(
        f'[project]\nname = "w"\nversion = "{VERSION}"\n' + URLS
    )
    assert items(release_check.blockers(tree, make_dist(tmp_path / "dist"))) == [
        "worker-package/pyproject.toml has a version of its own"
    ]


def test_a_failed_build_is_a_blocker(tree: Path, tmp_path: Path) -> None:
    found = release_check.blockers(tree, make_dist(tmp_path / "dist"), build_ok=False)
    assert items(found) == ["make dist's build or twine check --strict failed"]


def test_the_real_tree_is_not_releasable_and_says_why(tmp_path: Path) -> None:
    """Nothing has been released and the repository has no public address: exactly those items (the dist
    here is a stand-in for make dist's, which tools/check_dist.py checks)."""
    version = airflow_kueue_provider.__version__
    dist = make_dist(tmp_path / "dist", version=version)
    assert items(release_check.blockers(REPO, dist)) == [
        f'CHANGELOG.md has no "## [{version}]" section',
        "pyproject.toml has no [project.urls]",
        "worker-package/pyproject.toml has no [project.urls]",
    ]
