"""Acceptance 6: ``up`` reuses what runs; ``down`` stops every process that ``up`` started.

Named ``zz`` so that it runs after the other cluster tests; it brings the cluster back up at the end.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devcluster.components import process_node_count
from devcluster.layout import Layout

from ..cluster import Cluster

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.serial  # it stops the whole cluster


def _recorded(layout: Layout) -> dict[str, tuple[int, str]]:
    out = {}
    for f in layout.pids.glob("*.pid"):
        pid, exe = f.read_text().split("\n")[:2]
        out[f.stem] = (int(pid), exe)
    return out


def _processes_running(executables: set[str]) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        head = " ".join(a.decode(errors="replace") for a in argv[:3])
        if any(exe in head for exe in executables):
            found.append(f"{entry.name}: {head}")
    return found


def _devcluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devcluster", *args], cwd=REPO, capture_output=True, text=True, check=False
    )


@pytest.mark.long  # a minute of the bed's own tooling (down, up, up again), outside make test's 45 minutes
def test_up_is_idempotent_and_down_leaves_no_process(
    devcluster_env: dict[str, str], cluster: Cluster
) -> None:
    layout = Layout(Path(devcluster_env["DEVCLUSTER_STATE"]))
    before = _recorded(layout)
    assert set(before) == {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
        "kueue",
        "jobset",
        "azurite",
        *(f"procnode-{n}" for n in range(process_node_count())),
    }

    again = _devcluster("up")
    assert again.returncode == 0, again.stdout + again.stderr
    assert _recorded(layout) == before, "a second `up` must reuse the running processes"
    status = _devcluster("status")
    assert status.returncode == 0 and "stopped" not in status.stdout, status.stdout

    try:
        down = _devcluster("down")
        assert down.returncode == 0, down.stdout + down.stderr
        for name, (pid, _) in before.items():
            assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), f"{name} (pid {pid}) still runs"
        assert _processes_running({exe for _, exe in before.values()}) == []
        assert not list(layout.pids.glob("*.pid"))
        assert _devcluster("status").returncode == 1
    finally:
        restarted = _devcluster("up")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert cluster.core.list_node(label_selector="type=kwok").items


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] == "Z"
    except (OSError, IndexError):
        return True


@pytest.mark.long  # 50 s of the bed's own tooling; the soak's apiserver kills exercise `up`'s healing in CI
def test_up_replaces_an_apiserver_still_shutting_down_after_sigterm() -> None:
    """`up` right after an outside SIGTERM: the old apiserver still lives (its graceful shutdown takes longer
    than 5 s) but is not healthy; `up` stops it and starts a fresh one instead of waiting and failing."""
    import os
    import signal
    import time

    from devcluster import procs

    layout = Layout.default()
    subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, check=True, capture_output=True)
    old = procs.running_pid(layout, "kube-apiserver")
    assert old is not None
    os.kill(old, signal.SIGTERM)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, check=True, capture_output=True)
    new = procs.running_pid(layout, "kube-apiserver")
    assert new is not None and new != old
    assert time.monotonic() - started < 90, "well before the 120 s health wait of a stuck start"
