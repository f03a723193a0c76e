"""The install commands the docs give (README.md's Install section, docs/install.md, docs/worker-package.md)
run as written in a clean venv, from exactly the files each Docker image copies from the repository (so the
images' COPY lines are enough too): the provider's beside its worker package, the worker package alone."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

import airflow_kueue_provider
from tests.unit.docker.test_docker_files import (
    AIRFLOW_DOCKERFILE,
    SHARD_DOCKERFILE,
    copy_sources,
    instructions,
)
from tests.unit.packaging.installs import PROVIDER, REPO, WORKER, copy_tree, installed_files, new_venv, run

VERSION = airflow_kueue_provider.__version__
PROVIDER_COMMAND = "pip install ./worker-package ."
WORKER_COMMAND = "pip install ./worker-package"
PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def commands(markdown: str) -> list[str]:
    """The ``pip install`` lines of the bash code blocks."""
    blocks = re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith("pip install")]


def image_sources(dockerfile: Path) -> list[str]:
    """What the image copies from the repository to install from (not the DAGs)."""
    copied = [s.rstrip("/") for i in instructions(dockerfile) if i.keyword == "COPY" for s in copy_sources(i)]
    return [s for s in copied if s != "example_dags"]


def test_the_docs_give_one_command_each_and_agree() -> None:
    readme = (REPO / "README.md").read_text()
    install_section = readme.split("## Install\n", 1)[1].split("\n## ", 1)[0]
    assert commands(install_section) == [PROVIDER_COMMAND, WORKER_COMMAND]
    assert commands((REPO / "docs" / "install.md").read_text()) == [PROVIDER_COMMAND, WORKER_COMMAND]
    assert commands((REPO / "docs" / "worker-package.md").read_text())[0] == WORKER_COMMAND


def test_the_provider_command_installs_both_from_the_clone(tmp_path: Path) -> None:
    """In a venv that already has Airflow and the provider's other dependencies (as the Airflow image does):
    it sees this interpreter's site-packages through a ``.pth`` (not the index: ``make dist`` installs them
    from there), so pip must take the provider's pin of its worker package from the clone."""
    source = copy_tree(tmp_path / "src", image_sources(AIRFLOW_DOCKERFILE))
    python = new_venv(tmp_path / "venv", with_pip=True)
    site = Path(run([python, "-c", PURELIB], cwd=tmp_path).stdout.strip())
    (site / "_outer_site_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([python.parent / "pip", *PROVIDER_COMMAND.split()[1:]], cwd=source)
    assert installed_files(python, PROVIDER).isdisjoint(installed_files(python, WORKER))
    shown = run([python.parent / "pip", "show", PROVIDER, WORKER], cwd=tmp_path).stdout
    assert shown.count(f"Location: {site}") == 2, shown  # both installed here, from the clone
    where = run(
        [python, "-c", "import airflow_kueue_provider as p; print(p.__version__, p.__file__)"], cwd=tmp_path
    )
    assert where.stdout.split() == [VERSION, f"{site}/airflow_kueue_provider/__init__.py"]


def test_the_worker_command_installs_the_worker_sdk_alone(tmp_path: Path) -> None:
    """With its dependencies (the Azure SDKs), as the shard image does; no Airflow, no provider."""
    source = copy_tree(tmp_path / "src", image_sources(SHARD_DOCKERFILE))
    assert not (source / "pyproject.toml").exists()  # the shard image has only the worker package's sources
    python = new_venv(tmp_path / "venv", with_pip=True)
    run([python.parent / "pip", *WORKER_COMMAND.split()[1:]], cwd=source)
    script = (
        "import importlib.util as u, airflow_kueue_provider as p\n"
        "from airflow_kueue_provider.worker import Shard, sample_shard\n"
        "print(hasattr(p, '__version__'), [m for m in ('airflow', 'kubernetes') if u.find_spec(m)])\n"
    )
    assert run([python, "-c", script], cwd=tmp_path).stdout.split("\n")[0] == "False []"
    assert run([python.parent / "pip", "list"], cwd=tmp_path).stdout.count("airflow-kueue-provider") == 1
