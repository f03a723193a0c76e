"""The MultiKueue workers' layouts: their own state and ports, never one the main cluster (or another worker)
listens on, and a kubeconfig Kueue accepts (CA data and a token, nothing read from a file)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from devcluster.components import components
from devcluster.layout import PORTS, Layout
from devcluster.multikueue import worker_kubeconfig, worker_layouts


def _ports(layout: Layout) -> list[int]:
    return [getattr(layout.ports, f.name) for f in dataclasses.fields(layout.ports)]


def test_workers_listen_on_ports_of_their_own_and_keep_their_own_state(tmp_path: Path) -> None:
    manager = Layout(tmp_path)
    workers = worker_layouts(manager, 3)
    assert [w.name for w in workers] == ["worker-1", "worker-2", "worker-3"]
    # Azurite runs once, on the main cluster; every other port is unique across the bed.
    in_use = _ports(manager) + [p for w in workers for p in _ports(w) if p != w.ports.azurite_blob]
    assert len(in_use) == len(set(in_use))
    assert {w.state for w in workers}.isdisjoint({manager.state}) and all(
        w.pki == manager.pki for w in workers
    )
    assert [c.name for c in components(Path("bin"), workers[0])][-1] == "kueue"
    assert components(Path("bin"), manager)[-1].name == "azurite"
    assert f"--secure-port={PORTS.apiserver + 100}" in components(Path("bin"), workers[0])[1].argv


def test_the_manager_reaches_a_worker_with_ca_data_and_a_token(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    worker = Layout(tmp_path).worker(2)
    config = yaml.safe_load(worker_kubeconfig(worker, "t0ken"))
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"] == f"https://127.0.0.1:{PORTS.apiserver + 200}"
    assert (
        "certificate-authority-data" in cluster["cluster"]
        and "certificate-authority" not in cluster["cluster"]
    )
    assert config["users"] == [{"name": "multikueue-manager", "user": {"token": "t0ken"}}]
