"""What a triggerer's event-loop thread did during a stall: ran on a CPU, or waited for one.

Airflow's block watchdog (``TriggerRunner.block_watchdog``) sleeps 0.1 s and logs "async thread was blocked
for N seconds" when the sleep took longer than the threshold (0.2 s). It measures wall time, so it cannot
tell a trigger that held the loop from a process that got no CPU: on 2 cores shared with a Kubernetes
control plane, PostgreSQL, the scheduler's task processes (and in CI, a CPU quota that throttles the whole
cgroup), the loop thread can wait on a run queue past the threshold while no coroutine runs at all.

Linux tells the two apart: ``/proc/<pid>/task/<tid>/schedstat`` gives the nanoseconds a thread ran on a CPU
and the nanoseconds it spent runnable but waiting for one (run-queue delay, throttling included); the
``steal`` column of ``/proc/stat`` adds the time the hypervisor ran another guest on our virtual CPUs (which
a thread's own figures leave out). The sampler reads both for the trigger runner's loop thread (the
triggerer's forked child runs ``asyncio.run`` in its main thread) every 20 ms; a stall is explained as
starvation only when the loop ran no longer than the watchdog allows and waiting for a CPU (run queue plus
steal) covers at least half of the overrun. Everything else (a loop that
computed, or slept in blocking I/O) stays a failure, with these figures in the message.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

WATCHDOG_SLEEP = 0.1  # airflow/jobs/triggerer_job_runner.py, block_watchdog(): asyncio.sleep(0.1)
WATCHDOG_THRESHOLD = 0.2  # [triggerer] blocked_main_thread_warning_threshold, Airflow's default
SAMPLE_INTERVAL = 0.02
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # the unit of /proc/stat


@dataclass(frozen=True)
class LoopUsage:
    """Seconds the loop thread ran on a CPU and waited runnable for one, and the hypervisor's steal on all
    of the machine's CPUs, over a window."""

    on_cpu: float
    run_queue: float
    steal: float

    @property
    def waiting_for_cpu(self) -> float:
        return self.run_queue + self.steal

    def explains_as_starvation(self, stalled_for: float) -> bool:
        """True when the loop itself ran no longer than the watchdog allows (so no callback of any trigger
        held it past the threshold) and waiting for a CPU accounts for at least half of the overrun."""
        overrun = stalled_for - WATCHDOG_SLEEP
        return self.on_cpu <= WATCHDOG_THRESHOLD - WATCHDOG_SLEEP and self.waiting_for_cpu >= overrun / 2

    def describe(self) -> str:
        return (
            f"loop thread on a CPU {self.on_cpu:.3f} s, on a run queue {self.run_queue:.3f} s; "
            f"the machine's steal {self.steal:.3f} s"
        )


def _schedstat(pid: int) -> tuple[float, float] | None:
    try:
        ran, waited, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return int(ran) / 1e9, int(waited) / 1e9


def _steal() -> float:
    """Seconds of steal on all CPUs since boot (the 8th figure of /proc/stat's ``cpu`` line)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8]) / CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


def _children(pid: int) -> list[int]:
    """The process's children: /proc's list (CONFIG_PROC_CHILDREN), else psutil's scan of /proc."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        import psutil

        try:
            return [child.pid for child in psutil.Process(pid).children()]
        except psutil.Error:
            return []
    except (OSError, ValueError):
        return []


class LoopThreadSampler:
    """Samples the schedstat of every child of a triggerer process (its trigger runner) in a daemon thread.

    Samples are kept per runner pid, so a restarted triggerer's new runner has a timeline of its own.
    """

    def __init__(self, triggerer_pid: int, interval: float = SAMPLE_INTERVAL) -> None:
        self.triggerer_pid = triggerer_pid
        self.interval = interval
        self.samples: dict[
            int, list[tuple[float, float, float, float]]
        ] = {}  # pid -> (time, ran, waited, steal)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"loop-sampler-{triggerer_pid}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        runners: list[int] = []
        next_lookup = 0.0
        while not self._stop.is_set():
            now = time.time()
            if not runners or now >= next_lookup:
                runners, next_lookup = _children(self.triggerer_pid), now + 0.5
            steal = _steal()
            for pid in runners:
                if (stat := _schedstat(pid)) is not None:
                    self.samples.setdefault(pid, []).append((now, *stat, steal))
            self._stop.wait(self.interval)

    def usage(self, start: float, end: float) -> LoopUsage | None:
        """The loop thread's usage from the last sample at or before ``start`` to the first at or after
        ``end`` (wall-clock seconds); None when no runner was sampled across the whole window."""
        for timeline in self.samples.values():
            times = [s[0] for s in timeline]
            first = bisect.bisect_right(times, start) - 1
            last = bisect.bisect_left(times, end)
            if first < 0 or last >= len(timeline):
                continue
            (_, ran0, waited0, steal0), (_, ran1, waited1, steal1) = timeline[first], timeline[last]
            return LoopUsage(on_cpu=ran1 - ran0, run_queue=waited1 - waited0, steal=steal1 - steal0)
        return None
