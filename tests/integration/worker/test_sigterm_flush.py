"""SIGTERM at random points of a real shard loop (``sigterm_loop.py``) against Azurite, many times over.

Each chain is one shard: its pod is started, SIGTERMed at a random moment, started again (a restart resumes
from the checkpoint of most progress), SIGTERMed again... and finally left to finish. Runs differ in where
the signal lands: anywhere in the loop (which logs heavily through a slow handler, so often inside a logging
call), right after start-up, inside a slow Blob write (every request delayed by a proxy), or inside a Blob
write that never returns (the proxy freezes the main thread's connection; the flush gets a new one). After
every run:

- it exited 143 within the grace period, having written its checkpoint within the flush budget (a signal
  before ``load()`` returned, or before a fresh start's first item, finds nothing to write; then that run
  recorded nothing);
- the checkpoint of most progress says exactly how many items the counter file holds, in order, once each;

and after the chain the counter file holds every item exactly once. 40 signals in the default suite, 200 in
the one marked ``long``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_kueue_provider.storage.blob_store import BlobStore
from airflow_kueue_provider.worker import EXIT_SIGTERM, Shard
from airflow_kueue_provider.worker.sigterm_flush import FLUSH_MARGIN_SECONDS

from ..tcp_proxy import FreezableProxy

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SCRIPT = HERE / "sigterm_loop.py"
PREFIX = "dag/run/task"
GRACE = 10.0
ITEMS = (
    100_000  # never reached by a signalled run; the final run of a chain gets --items of what was done + 5
)
AZURITE = ("127.0.0.1", 10000)
MODES = ("loop", "loop", "loop", "startup", "slow-blob", "frozen-blob")  # weights: half of them in the loop


@pytest.fixture
def container(devcluster_env: dict[str, str]) -> Iterator[tuple[str, BlobStore]]:
    cs = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    name = f"t-sigterm-{uuid.uuid4().hex[:12]}"
    with BlobStore.from_connection_string(cs, name) as hook:
        hook.check()
        yield cs, hook
        with suppress(Exception):
            hook.get_conn().delete_container()


class SlowProxy(FreezableProxy):
    """The freezable proxy, with every chunk in either direction held ``delay`` seconds first."""

    def __init__(self, target_host: str, target_port: int, delay: float) -> None:
        super().__init__(target_host, target_port)
        self.delay = delay

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    await asyncio.sleep(self.delay)
                    dst.write(data)
                    await dst.drain()
            with suppress(Exception):
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


def pod_env(connection_string: str, container: str, index: int, port: int) -> dict[str, str]:
    """What a pod gets (local-run flavour: a connection string), pointed at ``port`` (Azurite or a proxy)."""
    cs = connection_string.replace(f"127.0.0.1:{AZURITE[1]}", f"127.0.0.1:{port}")
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "JOB_COMPLETION_INDEX": str(index),
        "AIRFLOW_KUEUE_CHECKPOINT_URL": f"http://127.0.0.1:{port}/devstoreaccount1/{container}",
        "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": PREFIX,
        "AIRFLOW_KUEUE_GRACE_SECONDS": str(int(GRACE)),
        "AZURE_STORAGE_CONNECTION_STRING": cs,
    }


def best_checkpoint(hook: BlobStore, shard_id: int) -> dict[str, object] | None:
    """What a restart resumes from (a reader that prunes nothing)."""
    return Shard(shard_id, shard_id, hook, prefix=PREFIX, keep=1_000_000).load()


def counted(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@dataclass
class Tally:
    runs: int = 0
    exit_seconds: list[float] = field(default_factory=list)
    by_mode: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    landed: collections.Counter[str] = field(default_factory=collections.Counter)
    modes: collections.Counter[str] = field(default_factory=collections.Counter)
    hard_exits: int = 0  # the flush thread ended the process (os._exit)
    flush_seconds: list[float] = field(default_factory=list)  # signal → checkpoint written, as the pod says
    nothing_to_write: int = 0  # signalled before load() returned, or a fresh start before its first item
    lock: threading.Lock = field(default_factory=threading.Lock)


def signalled_run(cs: str, container: str, hook: BlobStore, shard_id: int, counter: Path, mode: str,
                  rng: random.Random, slow: SlowProxy, tally: Tally) -> None:  # fmt: skip
    frozen = FreezableProxy(*AZURITE) if mode == "frozen-blob" else None
    with frozen.running() if frozen else contextlib.nullcontext():
        port = frozen.port if frozen else slow.port if mode == "slow-blob" else AZURITE[1]
        slow_log = rng.choice([0.001, 0.003, 0.01])  # seconds a record holds the handler's lock
        every = rng.choice([1, 3]) if mode.endswith("blob") else rng.choice([3, 10])  # saves: Blob writes
        cmd = [sys.executable, str(SCRIPT), "--items", str(ITEMS), "--counter", str(counter),
               "--every", str(every), "--slow-log", str(slow_log)]  # fmt: skip
        stderr = counter.with_suffix(f".{uuid.uuid4().hex[:6]}.err")
        with open(stderr, "w") as err:
            proc = subprocess.Popen(
                cmd, env=pod_env(cs, container, shard_id, port), stdout=subprocess.PIPE, stderr=err, cwd=REPO
            )
        assert proc.stdout is not None
        before = len(counted(counter))
        out: list[str] = []

        def until(prefix: str) -> None:
            while line := proc.stdout.readline().decode():  # type: ignore[union-attr]
                out.append(line.strip())
                if line.startswith(prefix):
                    return
            raise AssertionError(f"exited before {prefix!r}: {out} {stderr.read_text()[-2000:]}")

        if mode == "startup":
            until("READY")  # the handler is installed: is_done, load, the loop's first items
            time.sleep(rng.uniform(0.0, 1.0))
        elif mode == "frozen-blob":
            until("LOOP")
            time.sleep(rng.uniform(0.0, 0.3))
            frozen.freeze_open_connections()  # type: ignore[union-attr]
            until("SAVING")  # this save waits on a frozen connection
            time.sleep(rng.uniform(0.0, 0.3))
        else:
            until("LOOP")
            time.sleep(rng.uniform(0.0, 0.6))
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            rest, _ = proc.communicate(timeout=GRACE + 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"{mode}: still running {GRACE + 5}s after SIGTERM") from None
        took = time.monotonic() - signalled
        out += rest.decode().split("\n")
        log = stderr.read_text()
        stderr.unlink()

    after = counted(counter)
    where = next((line.split()[1] for line in out if line.startswith("SIGNAL-AT")), None)
    assert proc.returncode == EXIT_SIGTERM, f"{mode}: exit {proc.returncode}\n{log[-3000:]}"
    assert took < GRACE, f"{mode}: exited {took:.1f}s after SIGTERM"
    written = re.search(r"SIGTERM, checkpoint \d+ \(progress (\S+)\) written in ([0-9.]+)s", log)
    if written:
        assert float(written[2]) < GRACE - FLUSH_MARGIN_SECONDS and float(written[1]) == len(after)
    else:  # signalled before load() returned, or on a fresh start before the first item: nothing yet
        assert "the flush had nothing to write" in log, f"{mode}: no checkpoint\n{log[-3000:]}"
        assert len(after) == before, f"{mode}: items recorded, no checkpoint written"

    assert after == [f"{shard_id}:{i}" for i in range(len(after))], f"{mode}: items lost or repeated"
    best = best_checkpoint(hook, shard_id)
    assert (best or {"next": 0})["next"] == len(after), (
        f"{mode}: resumes from {best}, {len(after)} items recorded\n{log[-3000:]}"
    )
    with tally.lock:
        tally.runs += 1
        tally.modes[mode] += 1
        tally.exit_seconds.append(took)
        tally.by_mode[mode].append(took)
        tally.landed[where or "unknown (os._exit before atexit)"] += 1
        tally.hard_exits += "HARD-EXIT" in out
        tally.nothing_to_write += not written
        if written:
            tally.flush_seconds.append(float(written[2]))


def chain(cs: str, container: str, hook: BlobStore, shard_id: int, runs: int, tmp: Path, slow: SlowProxy,
          tally: Tally) -> None:  # fmt: skip
    rng = random.Random(shard_id * 7919 + int(time.time()))
    counter = tmp / f"counter-{shard_id}"
    for _ in range(runs):
        signalled_run(cs, container, hook, shard_id, counter, rng.choice(MODES), rng, slow, tally)
    done = len(counted(counter))
    final = subprocess.run(
        [sys.executable, str(SCRIPT), "--items", str(done + 5), "--counter", str(counter)],
        env=pod_env(cs, container, shard_id, AZURITE[1]),
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert final.returncode == 0, final.stderr[-3000:]
    assert f"LOOP {done}" in final.stdout, "the restart resumes exactly where the last run stopped"
    assert counted(counter) == [f"{shard_id}:{i}" for i in range(done + 5)], "every item exactly once"
    assert hook.read_json(f"{PREFIX}/shards/{shard_id}/done.json")[0] is not None


def run_chains(container: tuple[str, BlobStore], tmp_path: Path, chains: int, runs_per_chain: int) -> None:
    cs, hook = container
    tally = Tally()
    started = time.monotonic()
    slow = SlowProxy(*AZURITE, delay=0.08)
    with slow.running(), ThreadPoolExecutor(chains) as pool:
        futures = [
            pool.submit(chain, cs, hook.container, hook, shard_id, runs_per_chain, tmp_path, slow, tally)
            for shard_id in range(chains)
        ]
        for future in futures:
            future.result()
    took = time.monotonic() - started
    seconds, flushes = sorted(tally.exit_seconds), sorted(tally.flush_seconds)
    summary = (
        f"{tally.runs} SIGTERMs in {took:.0f}s ({chains} at a time); modes {dict(tally.modes)}; main "
        f"thread at the signal: {dict(tally.landed)}; nothing to write yet (no checkpoint, no item): "
        f"{tally.nothing_to_write}; ended by the os._exit backstop: {tally.hard_exits}; SIGTERM → "
        f"checkpoint written (in the pod): median {flushes[len(flushes) // 2]:.2f}s, max {flushes[-1]:.2f}s; "
        f"SIGTERM → exit seen by this test: median {seconds[len(seconds) // 2]:.2f}s, max "
        f"{seconds[-1]:.2f}s (grace {GRACE:.0f}s); by mode (median, max): "
        + ", ".join(
            f"{m} {sorted(v)[len(v) // 2]:.2f}/{max(v):.2f}s" for m, v in sorted(tally.by_mode.items())
        )
    )
    print(summary)
    (tmp_path / "summary.txt").write_text(summary)
    assert tally.runs == chains * runs_per_chain
    assert seconds[-1] < GRACE
    assert tally.landed["logging"] >= tally.runs // 10, f"too few signals inside logging calls: {summary}"
    assert tally.landed["blob"] >= 1, f"no signal inside a Blob call: {summary}"


def test_sigterm_at_random_points_of_the_loop(container: tuple[str, BlobStore], tmp_path: Path) -> None:
    run_chains(container, tmp_path, chains=8, runs_per_chain=5)


@pytest.mark.long
def test_sigterm_200_times(container: tuple[str, BlobStore], tmp_path: Path) -> None:
    """Three to four minutes on 2 busy cores: only with ``-m long`` (e.g. ``-m 'integration and long'``)."""
    run_chains(container, tmp_path, chains=8, runs_per_chain=25)


def test_two_pods_of_one_index_never_move_progress_back(
    container: tuple[str, BlobStore], tmp_path: Path
) -> None:
    """Pod A runs ahead, checkpointing every 10 items; pod B of the same index starts later, from A's last
    checkpoint, works 4 times slower but checkpoints every item: its numbers overtake A's while its progress
    stays behind. What a restart would resume from never goes back (by sequence number it would)."""
    cs, hook = container
    env = pod_env(cs, hook.container, 3, AZURITE[1])

    def start(name: str, item_seconds: float, every: int) -> subprocess.Popen[str]:
        with open(tmp_path / f"{name}.err", "w") as err:  # a file: a full pipe would stall the pod
            return subprocess.Popen(
                [sys.executable, str(SCRIPT), "--items", str(ITEMS), "--counter", str(tmp_path / name),
                 "--every", str(every), "--item-seconds", str(item_seconds)],
                env=env, stdout=subprocess.DEVNULL, stderr=err, text=True, cwd=REPO,
            )  # fmt: skip

    seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            try:
                best = best_checkpoint(hook, 3)
            except BaseException as exc:
                errors.append(exc)
                return
            seen.append(int(best["next"]) if best else 0)  # type: ignore[call-overload]

    def wait_for(name: str, items: int) -> None:
        deadline = time.monotonic() + 60
        while len(counted(tmp_path / name)) < items:
            assert time.monotonic() < deadline and not errors, f"pod {name} stalled: {errors}"
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    procs = [start("a", 0.005, 10)]
    watcher.start()
    try:
        wait_for("a", 20)
        procs.append(start("b", 0.02, 1))
        wait_for("b", 40)
        ahead, behind = procs
        for proc in (behind, ahead):
            proc.send_signal(signal.SIGTERM)
        for proc in (ahead, behind):
            proc.wait(timeout=GRACE + 5)
        outcomes = [(tmp_path / f"{name}.err").read_text()[-3000:] for name in ("a", "b")]
    finally:
        stop.set()
        watcher.join()
        for proc in procs:
            with suppress(Exception):
                proc.kill()
    assert not errors, errors
    assert [proc.returncode for proc in (ahead, behind)] == [EXIT_SIGTERM, EXIT_SIGTERM], outcomes
    flushed = [int(m) for err in outcomes for m in re.findall(r"\(progress (\d+)\) written", err)]
    assert len(flushed) == 2 and flushed[0] > flushed[1], outcomes  # A stayed ahead
    assert seen and seen == sorted(seen), "progress went back"
    assert best_checkpoint(hook, 3) == {"next": flushed[0]}
    restart = Shard(3, 3, hook, prefix=PREFIX, keep=3)  # what the next pod does: resume, prune the rest
    assert restart.load() == {"next": flushed[0]}
    assert len(hook.list_names(f"{PREFIX}/shards/3/checkpoint-")) <= 3
    print(f"two pods: {len(seen)} reads while both wrote, never back; flushed progress {flushed}")
