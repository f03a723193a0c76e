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
