"""The two wheels installed and uninstalled in both orders in a clean venv: each keeps working without the
other as far as it can (the worker SDK without the provider; the provider names its fix without the worker),
and no file is installed by both (``pip show -f``). Airflow is not installed (``--no-deps`` for the
provider): what is checked is file ownership and the imports that need no Airflow; ``make dist`` installs
both wheels with every dependency and asks ``airflow providers list``."""

from __future__ import annotations

import sys
from pathlib import Path

import airflow_kueue_provider
from tests.unit.packaging.installs import (
    PROVIDER,
    WORKER,
    copy_tree,
    installed_files,
    new_venv,
    pip_into,
    run,
)

VERSION = airflow_kueue_provider.__version__
RESTORED = (
    "import airflow_kueue_provider as p, airflow_kueue_provider.worker as w; print(p.__version__, w.__file__)"
)
WORKER_IMPORT = (
    "import airflow_kueue_provider as p, airflow_kueue_provider.worker.sample_shard; "
    "from airflow_kueue_provider.worker import Shard, shard_id_for_index; "
    "print(getattr(p, '__file__', None), list(p.__path__))"
)


def build_wheels(tmp_path: Path) -> dict[str, Path]:
    source = copy_tree(tmp_path / "src")
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            tmp_path / "dist",
            "./worker-package",
            ".",
        ],
        cwd=source,
    )
    return {
        PROVIDER: next((tmp_path / "dist").glob(f"airflow_kueue_provider-{VERSION}-*.whl")),
        WORKER: next((tmp_path / "dist").glob(f"airflow_kueue_provider_worker-{VERSION}-*.whl")),
    }


def test_install_and_uninstall_in_both_orders(tmp_path: Path) -> None:
    wheels = build_wheels(tmp_path)
    python = new_venv(tmp_path / "venv")
    site = run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path
    ).stdout.strip()

    def py(code: str, check: bool = True) -> str:
        done = run([python, "-c", code], cwd=tmp_path, check=check)
        return done.stdout + done.stderr

    # (a) the worker first (with its Azure dependencies), then the provider; the provider goes.
    pip_into(python, "install", "-q", wheels[WORKER])
    pip_into(python, "install", "-q", "--no-deps", wheels[PROVIDER])
    assert py("import airflow_kueue_provider as p; print(p.__version__, p.__file__)").split()[0] == VERSION
    # (c) one owner per file.
    provider_files, worker_files = installed_files(python, PROVIDER), installed_files(python, WORKER)
    assert "airflow_kueue_provider/__init__.py" in provider_files
    assert "airflow_kueue_provider/worker/__init__.py" in worker_files
    assert provider_files & worker_files == set()
    pip_into(python, "uninstall", "-y", PROVIDER)
    out = py(WORKER_IMPORT)
    assert out.startswith(f"None ['{site}/airflow_kueue_provider']"), out  # a namespace package now
    assert not (Path(site) / "airflow_kueue_provider" / "__init__.py").exists()

    # (b) the provider first this time, then the worker; the worker goes.
    pip_into(python, "uninstall", "-y", WORKER)
    left = [str(f) for f in (Path(site) / "airflow_kueue_provider").rglob("*") if f.is_file()]
    assert not left, f"the two uninstalls left {left}"  # (pip may leave the emptied folder)
    pip_into(python, "install", "-q", "--no-deps", wheels[PROVIDER])
    pip_into(python, "install", "-q", "--no-deps", wheels[WORKER])
    pip_into(python, "uninstall", "-y", WORKER)
    out = py("import airflow_kueue_provider.operators.indexed_job", check=False)
    assert f"WorkerPackageMissing: airflow-kueue-provider {VERSION} needs {WORKER} {VERSION}" in out, out
    assert f"pip install {WORKER}=={VERSION}" in out
    pip_into(python, "install", "-q", "--no-deps", wheels[WORKER])  # the fix restores it
    out = py(RESTORED)
    assert out.split() == [VERSION, f"{site}/airflow_kueue_provider/worker/__init__.py"], out
