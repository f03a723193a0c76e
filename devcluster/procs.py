"""Start, find and stop the cluster's processes by pid file.

Each process runs in its own session (process group), logs to ``logs/<name>.log`` and is recorded in
``pids/<name>.pid``.  A pid is only trusted while ``/proc/<pid>/cmdline`` still names the executable it was
started with, so a recycled pid is never killed.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .layout import Layout


@dataclass(frozen=True)
class Component:
    name: str
    argv: Sequence[str]
    health_url: str
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def executable(self) -> str:
        return str(self.argv[0])


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


def running_pid(layout: Layout, name: str, executable: str | None = None) -> int | None:
    """The pid of a live process started for ``name``, or None (a stale pid file is removed)."""
    pid_file = layout.pids / f"{name}.pid"
    try:
        pid_text, _, recorded_exe = pid_file.read_text().partition("\n")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    expected = executable or recorded_exe.strip()
    cmd = _cmdline(pid)
    if cmd and expected and any(expected in part for part in cmd[:3]):
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def find_running(comp: Component) -> int | None:
    """A live process with exactly ``comp``'s command line whose pid file was lost (e.g. two starts raced
    while a test had the component stopped): adopted rather than started twice on the same port."""
    argv = [str(a) for a in comp.argv]
    for entry in Path("/proc").iterdir():
        # a script's interpreter (node for Azurite) comes first in /proc/<pid>/cmdline
        if entry.name.isdigit() and _cmdline(int(entry.name))[-len(argv) :] == argv:
            return int(entry.name)
    return None


def start(layout: Layout, comp: Component) -> int:
    """Start ``comp`` unless it already runs (by pid file, or an orphan of ours: adopted); return its pid."""
    pid = running_pid(layout, comp.name, comp.executable) or find_running(comp)
    if pid is not None:
        (layout.pids / f"{comp.name}.pid").write_text(f"{pid}\n{comp.executable}\n")
        return pid
    log = open(layout.logs / f"{comp.name}.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        list(comp.argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=comp.cwd or layout.state,
        env={**os.environ, **comp.env},
        start_new_session=True,
    )
    log.close()
    (layout.pids / f"{comp.name}.pid").write_text(f"{proc.pid}\n{comp.executable}\n")
    return proc.pid


def stop(layout: Layout, name: str, grace: float = 15.0) -> int | None:
    """SIGTERM the component's process group, SIGKILL it after ``grace`` seconds (``grace`` 0: SIGKILL at
    once, as a crash). Returns the pid stopped."""
    pid = running_pid(layout, name)
    if pid is None:
        return None
    steps = [(signal.SIGTERM, grace)] if grace > 0 else []
    for sig, wait in [*steps, (signal.SIGKILL, 30.0)]:  # a big heap takes seconds to free
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.1)
        if not _alive(pid):
            break
    (layout.pids / f"{name}.pid").unlink(missing_ok=True)
    return pid


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Nothing listens on ``port``: a bind succeeds (with SO_REUSEADDR, as the components bind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours (only when this process started it) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def process_rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` and its descendants, in KiB."""
    total = 0
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().split(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
        stack.extend(children.get(p, []))
    return total


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return bool(200 <= resp.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until(what: str, check: Callable[[], bool], timeout: float, log_hint: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    hint = ""
    if log_hint and log_hint.exists():
        tail = log_hint.read_text(errors="replace").splitlines()[-25:]
        hint = f"\n--- last lines of {log_hint} ---\n" + "\n".join(tail)
    raise TimeoutError(f"{what} not ready after {timeout:.0f}s{hint}")
