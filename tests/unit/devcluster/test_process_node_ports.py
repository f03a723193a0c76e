"""Each process node's ports: /healthz and the kubelet API (container logs), one of each per node, none
shared with another node or another component of the bed (the main cluster or a MultiKueue worker)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from devcluster.components import PROCESS_NODES_ENV, components, process_node_count
from devcluster.layout import HOST, MAX_PROCESS_NODES, Layout
from devcluster.multikueue import worker_layouts


def _flag(argv: list[str], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    return value


def _procnodes(layout: Layout) -> list[list[str]]:
    return [list(c.argv) for c in components(Path("bin"), layout) if c.name.startswith("procnode-")]


@pytest.mark.parametrize("count", [1, 2, 5, MAX_PROCESS_NODES])
def test_each_process_node_gets_a_kubelet_port_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    monkeypatch.setenv(PROCESS_NODES_ENV, str(count))
    layout = Layout(tmp_path)
    nodes = _procnodes(layout)
    assert len(nodes) == count
    kubelet = [int(_flag(argv, "kubelet-port")) for argv in nodes]
    health = [int(re.sub(rf"^{HOST}:", "", _flag(argv, "health-addr"))) for argv in nodes]
    assert kubelet == [layout.ports.procnode_kubelet + n for n in range(count)]
    assert len(set(kubelet)) == count
    # Every listener of the bed is a port of its own: the main cluster's components, the process nodes'
    # health and kubelet ports (node 0's are the two base fields), the MultiKueue workers' components.
    bases = {"procnode_health", "procnode_kubelet"}
    main = [getattr(layout.ports, f.name) for f in dataclasses.fields(layout.ports) if f.name not in bases]
    workers = [
        getattr(w.ports, f.name) for w in worker_layouts(layout, 3) for f in dataclasses.fields(w.ports)
    ]
    listeners = main + health + kubelet + workers
    assert len(listeners) == len(set(listeners))


def test_more_process_nodes_than_the_ports_have_room_for_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROCESS_NODES_ENV, str(MAX_PROCESS_NODES + 1))
    with pytest.raises(ValueError, match="at most 30 process nodes"):
        process_node_count()
