"""``make dist`` (tools/check_dist.py): what it checks in a built wheel, and how it names a twine failure.
(The script itself builds, installs and runs Airflow: run ``make dist``.)"""

from __future__ import annotations

import zipfile
from pathlib import Path

import airflow_kueue_provider
from tests.tool_modules import load_tool

check_dist = load_tool("check_dist")


def wheel(
    tmp_path: Path, files: dict[str, str], version: str = "1.2.3", extras: tuple[str, ...] = ()
) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"demo-{version}-py3-none-any.whl"
    meta = f"Metadata-Version: 2.4\nName: demo\nVersion: {version}\n"
    meta += "".join(f"Provides-Extra: {extra}\n" for extra in extras)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"demo-{version}.dist-info/METADATA", meta)
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_it_reads_the_version_the_package_declares() -> None:
    assert check_dist.package_version() == airflow_kueue_provider.__version__


def test_a_good_wheel_has_no_problems(tmp_path: Path) -> None:
    built = wheel(
        tmp_path,
        {"demo/py.typed": "", "demo-1.2.3.dist-info/entry_points.txt": "[apache_airflow_provider]\nx = y\n"},
    )
    assert (
        check_dist.wheel_problems(built, "demo", "1.2.3", ["demo/py.typed", "[apache_airflow_provider]"])
        == []
    )


def test_each_problem_is_named(tmp_path: Path) -> None:
    built = wheel(tmp_path, {}, version="1.2.2", extras=("dev",))
    problems = check_dist.wheel_problems(built, "other", "1.2.3", ["demo/py.typed", "[airflow.plugins]"])
    assert problems == [
        f"{built.name}: Name 'demo', expected 'other'",
        f"{built.name}: Version '1.2.2', but __version__ is '1.2.3'",
        f"{built.name}: a 'dev' extra (the development tools are a dependency group)",
        f"{built.name}: demo/py.typed is missing",
        f"{built.name}: no [airflow.plugins] entry point",
    ]


def test_a_long_description_failure_is_told_apart() -> None:
    assert check_dist.long_description_trouble("WARNING  `long_description` has syntax errors in markup")
    assert check_dist.long_description_trouble("WARNING  `long_description_content_type` missing.")
    assert not check_dist.long_description_trouble(
        "ERROR    InvalidDistribution: Invalid distribution metadata"
    )


def test_a_missing_requirement_is_named(tmp_path: Path) -> None:
    built = wheel(tmp_path, {})
    assert check_dist.wheel_problems(built, "demo", "1.2.3", requires=["other==1.2.3"]) == [
        f"{built.name}: no Requires-Dist other==1.2.3"
    ]


def test_a_file_in_both_wheels_is_named(tmp_path: Path) -> None:
    """One owner per installed file: the provider's wheel and the worker's share none (dist-info aside)."""
    first = wheel(tmp_path / "a", {"pkg/__init__.py": "", "pkg/a.py": ""})
    second = wheel(tmp_path / "b", {"pkg/__init__.py": "", "pkg/b/__init__.py": ""})
    assert check_dist.shared_files(first, second) == ["pkg/__init__.py"]
    problems = check_dist.dist_problems(first, second, "1.2.3")
    assert problems[-1] == "both wheels install pkg/__init__.py: give each file one owner"
