"""``KueueHook.test_connection`` on the bed: a good connection names the Kueue API it reads; a refused token
and an unreachable server each fail naming the cause, never the token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from airflow_kueue_provider.airflow_compat import BaseHook
from airflow_kueue_provider.hooks.kueue_hook import KueueHook

FORGED_TOKEN = "not-a-token-this-cluster-knows-5f1c"


def _connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, kubeconfig: Path) -> None:
    conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def _kubeconfig_with(
    tmp_path: Path, source: Path, *, server: str | None = None, token: str | None = None
) -> Path:
    config = yaml.safe_load(source.read_text())
    if server is not None:
        config["clusters"][0]["cluster"]["server"] = server
    if token is not None:
        config["users"][0]["user"] = {"token": token}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_good_connection_names_the_kueue_api_it_reads(devcluster_env: dict[str, str]) -> None:
    hook = KueueHook("kubernetes_default")
    assert isinstance(hook, BaseHook)
    ok, message = hook.test_connection()
    assert ok, message
    assert "kueue.x-k8s.io/v1beta2" in message


def test_a_refused_token_and_an_unreachable_server_name_their_cause_without_the_token(
    devcluster_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = Path(devcluster_env["KUBECONFIG"])
    _connection(monkeypatch, "kueue_forged", _kubeconfig_with(tmp_path, source, token=FORGED_TOKEN))
    ok, message = KueueHook("kueue_forged").test_connection()
    assert not ok and "refused its credentials (HTTP 401)" in message, message
    assert FORGED_TOKEN not in message

    gone = tmp_path / "gone"
    gone.mkdir()
    _connection(monkeypatch, "kueue_gone", _kubeconfig_with(gone, source, server="https://127.0.0.1:9"))
    ok, message = KueueHook("kueue_gone").test_connection()
    assert not ok and "unreachable" in message and "kueue_gone" in message, message
