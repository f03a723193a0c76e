"""A side bed (the oldest-Kueue lane) beside the main one: its ports, with its MultiKueue workers', are
disjoint from the main bed's and its workers', and a bad shift is refused naming the variable."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from devcluster import cluster
from devcluster.layout import MAX_PROCESS_NODES, PORT_SHIFT_ENV, PORTS, Layout, azurite_connection_string
from devcluster.multikueue import worker_layouts


def _ports(layout: Layout) -> set[int]:
    ports = {getattr(layout.ports, f.name) for f in dataclasses.fields(layout.ports)}
    for base in (layout.ports.procnode_health, layout.ports.procnode_kubelet):
        ports |= set(range(base, base + MAX_PROCESS_NODES))
    return ports


def _bed(layout: Layout) -> set[int]:
    return _ports(layout).union(*(_ports(w) for w in worker_layouts(layout, 2)))


def test_a_shifted_bed_shares_no_port_with_the_main_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEVCLUSTER_STATE", str(tmp_path / "side"))
    monkeypatch.setenv(PORT_SHIFT_ENV, "1000")
    side = Layout.default()
    assert side.ports.apiserver == PORTS.apiserver + 1000 and side.state == (tmp_path / "side").resolve()
    assert _bed(side).isdisjoint(_bed(Layout(tmp_path / "main")))
    assert max(_bed(side)) < 32768  # below Linux's ephemeral ports
    assert f":{PORTS.azurite_blob + 1000}/" in azurite_connection_string(side.ports.azurite_blob)


@pytest.mark.parametrize("raw", ["", None])
def test_no_shift_is_the_main_bed(raw: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if raw is None:
        monkeypatch.delenv(PORT_SHIFT_ENV, raising=False)
    else:
        monkeypatch.setenv(PORT_SHIFT_ENV, raw)
    assert Layout.default().ports == PORTS


@pytest.mark.parametrize("raw", ["500", "-1000", "4000", "one"])
def test_a_bad_shift_is_refused_naming_the_variable(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_SHIFT_ENV, raw)
    with pytest.raises(ValueError, match=f"{PORT_SHIFT_ENV}=.*1000, 2000 or 3000"):
        Layout.default()


def test_another_kueue_release_comes_from_build_kueue(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def run(argv: list[str], **_: object) -> object:
        calls.append(argv)
        out = "/cache/bin/abc" if argv[1].endswith("build.sh") else "/cache/bin/abc-kueue-v0.15.2"
        return type("Done", (), {"stdout": f"noise\n{out}\n"})()

    monkeypatch.setattr(cluster.subprocess, "run", run)
    monkeypatch.setenv(cluster.KUEUE_VERSION_ENV, "v0.15.2")
    assert cluster.build_binaries() == Path("/cache/bin/abc-kueue-v0.15.2")
    assert calls[1][1:] == [str(cluster.DEVCLUSTER_SRC / "build_kueue.sh"), "/cache/bin/abc", "v0.15.2"]
    assert cluster.source_dir(Path("/cache/bin/abc-kueue-v0.15.2")) == Path("/cache/src/abc-kueue-v0.15.2")
    monkeypatch.delenv(cluster.KUEUE_VERSION_ENV)
    calls.clear()
    assert cluster.build_binaries() == Path("/cache/bin/abc") and len(calls) == 1
