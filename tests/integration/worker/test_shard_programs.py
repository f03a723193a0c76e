"""The example shard programs as real subprocesses with the env the operator injects, against Azurite.

A SIGTERM mid-shard and a restart: every item exactly once in the items log, and the shard's output is the
deterministic fold of its items. A SIGKILL and a restart: the items since the last periodic checkpoint are
redone (fewer than ``--checkpoint-every``), the output is still exact.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
import time
from pathlib import Path

from airflow_kueue_provider.storage.blob_store import BlobStore
from airflow_kueue_provider.worker import Shard
from example_dags.shard_programs import aligner, monte_carlo_pricer
from example_dags.shard_programs.shard_loop import expected_output, parse_items_log

from .test_shard_sdk import GRACE, PREFIX, base, pod_env, store  # noqa: F401 - fixtures

ITEMS, EVERY = 30, 5


def command(module: str, log: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", f"example_dags.shard_programs.{module}", "--items", str(ITEMS),
            "--checkpoint-every", str(EVERY), "--items-log", str(log), *extra]  # fmt: skip


def stop_after(proc: subprocess.Popen[str], log: Path, items: int, sig: signal.Signals) -> None:
    deadline = time.monotonic() + 60
    while (len(log.read_text().splitlines()) if log.exists() else 0) < items:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.01)
    proc.send_signal(sig)
    proc.communicate(timeout=GRACE + 5)


def test_the_pricer_flushes_on_sigterm_and_resumes_every_item_exactly_once(
    base: str,  # noqa: F811
    store: BlobStore,  # noqa: F811
    tmp_path: Path,
) -> None:
    env, log = {**pod_env(base, index=1, shards="4,9"), "HOSTNAME": "pod-a"}, tmp_path / "items"
    repo = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = repo
    first = subprocess.Popen(
        command("monte_carlo_pricer", log, "--item-seconds", "0.05"),
        env=env, cwd=repo, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    stop_after(first, log, 12, signal.SIGTERM)  # between two periodic checkpoints (10 and 15)
    assert first.returncode == 143
    flushed = len(log.read_text().splitlines())
    second = subprocess.run(
        command("monte_carlo_pricer", log), env={**env, "HOSTNAME": "pod-b"}, cwd=repo,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert f"starts at item {flushed} of {ITEMS} on pod-b" in second.stderr
    logged = parse_items_log(log.read_text())
    assert [(e.shard, e.item) for e in logged] == [(9, i) for i in range(ITEMS)], "each item once, in order"
    assert {e.pod for e in logged[:flushed]} == {"pod-a"} and {e.pod for e in logged[flushed:]} == {"pod-b"}
    done, _ = store.read_json(f"{PREFIX}/shards/9/done.json")
    work = monte_carlo_pricer.make_work(monte_carlo_pricer.parser().parse_args(command("x", log)[3:]))
    assert done is not None and done["output"] == expected_output("monte_carlo_pricer", work, 9, ITEMS)


def test_the_aligner_killed_without_grace_redoes_less_than_one_interval_and_ends_exact(
    base: str,  # noqa: F811
    store: BlobStore,  # noqa: F811
    tmp_path: Path,
) -> None:
    env, log = {**pod_env(base, index=2, shards=None), "HOSTNAME": "pod-a"}, tmp_path / "items"
    repo = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = repo
    first = subprocess.Popen(
        command("aligner", log, "--item-seconds", "0.05"),
        env=env, cwd=repo, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    stop_after(first, log, 13, signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    killed_at = len(log.read_text().splitlines())
    resume = Shard(2, 2, store, prefix=PREFIX, keep=1_000_000).load()  # what the restart resumes from
    assert resume is not None and killed_at - EVERY < resume["next"] <= killed_at
    second = subprocess.run(
        command("aligner", log), env=env, cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 0, second.stderr
    counts = collections.Counter(e.item for e in parse_items_log(log.read_text()))
    redone = sorted(i for i, n in counts.items() if n > 1)
    assert set(counts) == set(range(ITEMS)) and max(counts.values()) <= 2
    assert redone == list(range(resume["next"], killed_at)), "the items since the last checkpoint"
    done, _ = store.read_json(f"{PREFIX}/shards/2/done.json")
    assert done is not None and done["output"] == expected_output("aligner", aligner.align_item, 2, ITEMS)
