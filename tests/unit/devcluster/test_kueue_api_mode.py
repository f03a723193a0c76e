"""The bed's Kueue API mode: v1beta2 only (Kueue v0.20's surface) by default; ``both``: 0.19.2 as it ships."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from devcluster import manifests
from devcluster.layout import PORTS


def _crd(group: str, conversion: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "group": group,
        "versions": [
            {"name": "v1beta1", "served": True, "storage": False},
            {"name": "v1beta2", "served": True, "storage": True},
        ],
    }
    if conversion:
        spec["conversion"] = {
            "strategy": "Webhook",
            "webhook": {"clientConfig": {"service": {"name": "kueue-webhook-service", "port": 443}}},
        }
    return {"kind": "CustomResourceDefinition", "metadata": {"name": f"things.{group}"}, "spec": spec}


def _apiservice(version: str) -> dict[str, Any]:
    return {
        "kind": "APIService",
        "metadata": {"name": f"{version}.visibility.kueue.x-k8s.io"},
        "spec": {"service": {"name": "kueue-visibility-server", "port": 443}},
    }


RENDERED = [
    _crd("kueue.x-k8s.io", conversion=True),
    _crd("example.com"),
    _apiservice("v1beta1"),
    _apiservice("v1beta2"),
]


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifests, "_kustomized", lambda kubectl, directory: copy.deepcopy(RENDERED))


def _install(api: str) -> dict[str, dict[str, Any]]:
    docs = manifests.kueue_install(Path("kubectl"), Path("kueue"), PORTS, api=api)
    return {doc["metadata"]["name"]: doc for doc in docs}


def _served(doc: dict[str, Any]) -> dict[str, tuple[bool, bool]]:
    return {v["name"]: (v["served"], v["storage"]) for v in doc["spec"]["versions"]}


def test_default_mode_serves_v1beta2_only_and_drops_the_v1beta1_visibility_apiservice(rendered: None) -> None:
    docs = _install(manifests.kueue_api_mode(None))
    assert _served(docs["things.kueue.x-k8s.io"]) == {"v1beta1": (False, False), "v1beta2": (True, True)}
    assert docs["things.kueue.x-k8s.io"]["spec"]["conversion"]["strategy"] == "Webhook", "as v0.20 keeps it"
    assert _served(docs["things.example.com"]) == {"v1beta1": (True, False), "v1beta2": (True, True)}
    assert "v1beta1.visibility.kueue.x-k8s.io" not in docs
    assert "v1beta2.visibility.kueue.x-k8s.io" in docs
    assert manifests.kueue_stale_objects("v1beta2") == [("apiservice", "v1beta1.visibility.kueue.x-k8s.io")]


def test_both_mode_is_kueue_as_it_ships(rendered: None) -> None:
    docs = _install("both")
    assert _served(docs["things.kueue.x-k8s.io"]) == {"v1beta1": (True, False), "v1beta2": (True, True)}
    assert "v1beta1.visibility.kueue.x-k8s.io" in docs
    assert manifests.kueue_stale_objects("both") == []


@pytest.mark.parametrize("raw", [None, "", " v1beta2 "])
def test_unset_or_empty_is_the_v1beta2_mode(raw: str | None) -> None:
    assert manifests.kueue_api_mode(raw) == "v1beta2"


@pytest.mark.parametrize("raw", ["v1beta1", "v1beta3", "Both"])
def test_an_unknown_mode_is_refused_naming_the_variable_and_the_choices(raw: str) -> None:
    with pytest.raises(manifests.KueueApiModeError, match=r"DEVCLUSTER_KUEUE_API=.*v1beta2, both"):
        manifests.kueue_api_mode(raw)
