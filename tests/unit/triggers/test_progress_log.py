"""Which progress lines reach the task log."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.triggers import progress_log


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, fmt: str, *args: Any) -> None:
        self.lines.append(fmt % args)


def test_running_lines_are_rate_limited_but_others_and_the_last_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter([0.0, 1.0, 2.0, 3.0, 4.0, 35.0, 36.0])
    monkeypatch.setattr(progress_log.time, "monotonic", lambda: next(clock))
    rec = Recorder()
    log = progress_log.ProgressLog(rec, "ns/job")

    log.offer("queued in lq: waiting for quota")  # 0
    log.offer("queued in lq (position 1, 10 s): waiting for quota")  # 1: the position is news
    log.offer("admitted to cq [cpu: spot]")  # 2
    log.offer("running 0/9 done, 0 failed, 9 active")  # 3
    log.offer("running 1/9 done, 0 failed, 8 active")  # 4: too soon
    log.offer("running 5/9 done, 0 failed, 4 active")  # 35: an interval later
    log.offer("running 9/9 done, 0 failed, 0 active", force=True)  # 36: the end

    assert [line.split(": ", 1)[1] for line in rec.lines] == [
        "queued in lq: waiting for quota",
        "queued in lq (position 1, 10 s): waiting for quota",
        "admitted to cq [cpu: spot]",
        "running 0/9 done, 0 failed, 9 active",
        "running 5/9 done, 0 failed, 4 active",
        "running 9/9 done, 0 failed, 0 active",
    ]


def test_a_held_back_line_is_due_once_the_interval_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(progress_log.time, "monotonic", lambda: now[0])
    rec = Recorder()
    log = progress_log.ProgressLog(rec, "ns/job")
    log.offer("running 0/9 done, 0 failed, 9 active")
    assert log.due_in() is None  # nothing held
    now[0] = 4.0
    log.offer("running 6/9 done, 0 failed, 3 active")  # held back: the last line is 4 s old
    assert log.due_in() == progress_log.LINE_EVERY - 4.0  # the trigger wakes then and offers it again
    now[0] = progress_log.LINE_EVERY
    log.offer("running 6/9 done, 0 failed, 3 active")
    assert rec.lines[-1].endswith("running 6/9 done, 0 failed, 3 active") and log.due_in() is None
