"""A Kueue release older than v0.17 on the bed (the oldest-Kueue lane): its Configuration has no
``visibilityServer`` and its visibility server would bind the main bed's port, so the on-demand visibility
API is off there, and nothing of it is installed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import manifests
from devcluster.layout import PORTS

RENDERED: list[dict[str, Any]] = [
    {"kind": "APIService", "metadata": {"name": "v1beta2.visibility.kueue.x-k8s.io"}, "spec": {}},
    {"kind": "Service", "metadata": {"name": "kueue-visibility-server"}, "spec": {}},
    {"kind": "Service", "metadata": {"name": "kueue-webhook-service"}, "spec": {}},
]


def _release(tmp_path: Path, has_field: bool) -> Path:
    types = tmp_path / "apis" / "config" / "v1beta2" / "configuration_types.go"
    types.parent.mkdir(parents=True)
    types.write_text("type Configuration struct {\n" + ("VisibilityServer *VisibilityServer\n" * has_field))
    return tmp_path


@pytest.mark.parametrize("has_field", [True, False])
def test_the_release_says_whether_its_configuration_has_a_visibility_server(
    tmp_path: Path, has_field: bool
) -> None:
    assert manifests.has_visibility_server_config(_release(tmp_path, has_field)) is has_field


def test_an_older_release_runs_without_the_visibility_server(monkeypatch: pytest.MonkeyPatch) -> None:
    config = yaml.safe_load(manifests.kueue_config(Path("certs"), visibility_server=False))
    assert "visibilityServer" not in config
    assert config["featureGates"] == {"VisibilityOnDemand": False}
    monkeypatch.setattr(manifests, "_kustomized", lambda kubectl, directory: copy.deepcopy(RENDERED))
    docs = manifests.kueue_install(Path("kubectl"), Path("kueue"), PORTS, api="both", visibility=False)
    assert [d["metadata"]["name"] for d in docs] == ["kueue-webhook-service"]


def test_the_pinned_release_keeps_it() -> None:
    config = yaml.safe_load(manifests.kueue_config(Path("certs")))
    assert "visibilityServer" in config and "featureGates" not in config
