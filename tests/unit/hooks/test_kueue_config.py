"""[kueue] options come from the config file and the environment at exec, never from a later change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.hooks.kueue_config import ConfigSource, environment_at_exec, kueue_option


def test_the_environment_wins_over_the_file_and_unset_is_the_fallback(tmp_path: Path) -> None:
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text("[kueue]\nallowed_service_accounts = from-file\nallowed_namespaces = team-a\n")
    source = ConfigSource({"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__KUEUE__ALLOWED_NAMESPACES": "env-ns"})
    assert source.option("allowed_service_accounts") == "from-file"
    assert source.option("allowed_namespaces") == "env-ns"
    assert source.option("allowed_local_queues") is None
    other = tmp_path / "other.cfg"
    other.write_text("[kueue]\nallowed_service_accounts = named\n")
    assert ConfigSource({"AIRFLOW_CONFIG": str(other)}).option("allowed_service_accounts") == "named"
    assert ConfigSource({"AIRFLOW_CONFIG": str(tmp_path / "missing.cfg")}).option("x") is None


def test_a_later_os_environ_change_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS", "set-after-exec")
    monkeypatch.setattr(kueue_config, "current_source", kueue_config.process_source)
    if Path("/proc/self/environ").exists():
        assert environment_at_exec().get("AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS") != "set-after-exec"
        assert kueue_option("allowed_service_accounts") != "set-after-exec"


def test_a_child_process_reads_what_it_was_started_with(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "from airflow_kueue_provider.hooks.kueue_config import kueue_option\n"
        "os.environ['AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS'] = 'tampered'\n"
        "print(kueue_option('allowed_service_accounts'))\n"
    )
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS": "platform",
    }
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "platform"


def test_without_proc_the_environment_is_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__KUEUE__X", "1")
    assert environment_at_exec(tmp_path / "no-proc")["AIRFLOW__KUEUE__X"] == "1"


def _in_child(code: str, tmp_path: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPT_NOENV"}
    env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS="platform")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [*out.stdout.split(), out.stderr]


TITLE = "from setproctitle import setproctitle; setproctitle('airflow worker -- ' + 'x' * 40)\n"
TAMPER_AND_READ = (
    "import os\n"
    "os.environ['AIRFLOW__KUEUE__ALLOWED_SERVICE_ACCOUNTS'] = 'tampered'\n"
    "from airflow_kueue_provider.hooks.kueue_config import kueue_option\n"
    "print(kueue_option('allowed_service_accounts'))\n"
)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="Linux /proc")
def test_a_process_title_set_after_the_provider_is_loaded_leaves_the_environment_readable(
    tmp_path: Path,
) -> None:
    """Airflow's executor workers, supervisors and task runners set a title before the DAG file runs; the
    provider's package sets SPT_NOENV first, so the file keeps the variables (the import keeps them too)."""
    loaded = "import airflow_kueue_provider.hooks.kueue_config\n"
    said = _in_child(loaded + TITLE + TAMPER_AND_READ, tmp_path)
    assert said[0] == "platform", said


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="Linux /proc")
def test_a_process_title_set_before_the_provider_is_loaded_falls_back_to_os_environ_and_says_why(
    tmp_path: Path,
) -> None:
    said = _in_child(TITLE + TAMPER_AND_READ, tmp_path)
    assert said[0] == "tampered", said  # nothing else is left to read
    assert "SPT_NOENV=1" in said[-1] and "setproctitle overwrote it" in said[-1], said
