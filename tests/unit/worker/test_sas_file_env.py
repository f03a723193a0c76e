"""The SDK reads its SAS from the mounted Secret's file when the pod has one, else from the env var (pods
of an earlier version, local runs); an expired file SAS waits for the kubelet's refresh before failing."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_kueue_provider.storage import sas_file
from airflow_kueue_provider.storage.blob_errors import BlobConfigError
from airflow_kueue_provider.storage.blob_retry import RetryPolicy
from airflow_kueue_provider.storage.sas_file import FileSasCredential
from airflow_kueue_provider.worker.checkpoint_store import store_for
from airflow_kueue_provider.worker.env import ShardEnv

URL = "https://acct.blob.core.windows.net/ckpt-abc"


def _sas(minutes: int, sig: str) -> str:
    expiry = (datetime.now(UTC) + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"sv=2024-01-01&se={expiry}&sr=c&sp=racwdl&sig={sig}"


def _env(sas_file_path: Path | None, env_sas: str | None = None) -> ShardEnv:
    environ = {
        "JOB_COMPLETION_INDEX": "0",
        "AIRFLOW_KUEUE_CHECKPOINT_URL": URL,
        "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": "d/r/t",
    }
    if sas_file_path is not None:
        environ["AIRFLOW_KUEUE_CHECKPOINT_SAS_FILE"] = str(sas_file_path)
    if env_sas is not None:
        environ["AIRFLOW_KUEUE_CHECKPOINT_SAS"] = env_sas
    return ShardEnv.from_environ(environ)


def test_the_mounted_file_comes_first_and_the_env_var_is_the_fallback(tmp_path: Path) -> None:
    path = tmp_path / "sas-token"
    path.write_text(_sas(60, "file"))
    env = _env(path, _sas(60, "env"))
    assert env.sas_file == str(path)
    store = store_for(env, RetryPolicy())
    credential = store.get_auth().credential
    assert isinstance(credential, FileSasCredential) and credential.signature.endswith("sig=file")

    old_pod = store_for(_env(tmp_path / "absent", _sas(60, "env")), RetryPolicy())
    assert old_pod.get_auth().kind == "sas" and (old_pod.get_auth().secret or "").endswith("sig=env")


def test_an_expired_file_sas_waits_for_the_re_signed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sas_file, "POLL_SECONDS", 0.02)
    monkeypatch.setattr(sas_file, "REFRESH_WAIT_SECONDS", 0.3)
    path = tmp_path / "sas-token"
    path.write_text(_sas(-1, "expired"))
    with pytest.raises(BlobConfigError, match="expired"):
        store_for(_env(path), RetryPolicy())

    def refresh() -> None:
        time.sleep(0.1)
        path.with_suffix(".new").write_text(_sas(60, "fresh"))
        path.with_suffix(".new").replace(path)

    thread = threading.Thread(target=refresh)
    thread.start()
    store = store_for(_env(path), RetryPolicy())
    thread.join()
    credential = store.get_auth().credential
    assert isinstance(credential, FileSasCredential) and credential.signature.endswith("sig=fresh")
