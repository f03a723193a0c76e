#!/usr/bin/env python
"""The worker SDK's cost per shard in a pack: real Blob calls to the bed's Azurite, each answer delayed as
a network round trip would delay it.

A pack of ``--shards`` shards (index 0 runs them all) goes through ``Shard.each_from_env``'s loop
(``ShardPack``) with the shards' work a ``--work`` second sleep. The SDK's cost per shard is the pack's
wall time less the work, divided by the shards. Two programs: ``mark_done`` only, and ``load()`` then
``mark_done`` (what the sample programs do). Three forms in the same run: the done markers read and written
in line (the SDK before ``worker/done_lookahead.py``), read ahead and written in line (before
``worker/done_writes.py``), read ahead and written behind (the SDK now). The older forms are the loop given
an in-line reader or writer in place of the new one, the only difference.

The delay: a local proxy in front of Azurite holds every answer ``--round-trip`` seconds (default 0.02: a
Blob call from an AKS node to a storage account in the same region, about 10-20 ms for small blobs, rounded
up). Azurite's own time, about 2-4 ms a call here, comes on top in both forms.

    .venv/bin/python benchmarks/sdk_pack_cost.py      # about 1 min
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bed_env import load_devcluster_env, write_results  # noqa: E402

from airflow_kueue_provider.kueue.names import (  # noqa: E402
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_URL_ENV,
    INDEX_ENV,
    SHARDS_ENV,
    SHARDS_PER_POD_ENV,
)
from airflow_kueue_provider.storage.blob_store import BlobStore  # noqa: E402
from airflow_kueue_provider.worker import Shard, ShardEnv, ShardPack, shard_pack  # noqa: E402
from airflow_kueue_provider.worker.checkpoint_store import JsonStore  # noqa: E402
from airflow_kueue_provider.worker.done_lookahead import DoneLookahead  # noqa: E402
from airflow_kueue_provider.worker.done_writes import DoneWrites  # noqa: E402
from airflow_kueue_provider.worker.naming import done_name  # noqa: E402


class InLineDone:
    """The SDK before the look-ahead: each shard's done marker read just before the shard."""

    def __init__(self, store: JsonStore, prefix: str, shard_ids: Any) -> None:
        self.store, self.prefix = store, prefix

    def done(self, shard_id: int) -> bool:
        return self.store.read_json(done_name(self.prefix, shard_id))[0] is not None

    def close(self) -> None:
        pass


class InLineWrites:
    """The SDK before the write-behind: each done marker written when ``mark_done`` is called."""

    def submit(self, shard_id: int, write: Any) -> None:
        write()

    def drain(self, timeout: float | None = None) -> dict[int, str]:
        return {}


class DelayingProxy:
    """127.0.0.1:<port> -> ``upstream``, every chunk of an answer held ``delay`` seconds (a round trip)."""

    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, delay: float) -> None:
            try:
                while chunk := await src.read(65536):
                    if delay:
                        await asyncio.sleep(delay)
                    dst.write(chunk)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer, 0.0), pump(up_reader, writer, self.delay))


FORMS: list[tuple[str, Any, Any]] = [
    ("read and written in line (before)", InLineDone, InLineWrites),
    ("read ahead, written in line", DoneLookahead, InLineWrites),
    ("read ahead, written behind (now)", DoneLookahead, DoneWrites),
]


def run_pack(store: BlobStore, account: str, container: str, args: argparse.Namespace, load: bool) -> float:
    """Seconds of SDK cost per shard: the pack's wall time less its shards' work, over the shards."""
    environ = {
        INDEX_ENV: "0",
        CHECKPOINT_URL_ENV: f"{account}/{container}",
        CHECKPOINT_PREFIX_ENV: f"bench/{uuid.uuid4().hex[:8]}",
        SHARDS_ENV: f"0-{args.shards - 1}",
        SHARDS_PER_POD_ENV: str(args.shards),
    }
    pack = ShardPack(Shard, ShardEnv.from_environ(environ), handle_sigterm=False, stores=(store, store))
    started = time.monotonic()
    for shard in pack.shards():
        with shard:
            if load:
                shard.load()
            time.sleep(args.work)
            shard.mark_done({"items": 1})
    return (time.monotonic() - started - args.shards * args.work) / args.shards


def run(args: argparse.Namespace) -> dict[str, Any]:
    connection = os.environ["AZURE_STORAGE_CONNECTION_STRING"]
    fields = dict(part.split("=", 1) for part in connection.strip(";").split(";"))
    endpoint = urlsplit(fields["BlobEndpoint"])
    proxy = DelayingProxy((endpoint.hostname or "127.0.0.1", endpoint.port or 10000), args.round_trip)
    account = f"http://127.0.0.1:{proxy.port}{endpoint.path}"
    delayed = connection.replace(fields["BlobEndpoint"], account)
    container = f"sdk-cost-{uuid.uuid4().hex[:8]}"
    outcomes = []
    with BlobStore.from_connection_string(delayed, container) as store:
        store.get_conn().create_container()
        try:
            for program, load in (("mark_done", False), ("load + mark_done", True)):
                for form, reader, writer in FORMS:
                    shard_pack.DoneLookahead = reader  # type: ignore[misc,assignment]
                    shard_pack.DoneWrites = writer  # type: ignore[misc,assignment]
                    try:
                        costs = [run_pack(store, account, container, args, load) for _ in range(args.repeats)]
                    finally:
                        shard_pack.DoneLookahead = DoneLookahead  # type: ignore[misc]
                        shard_pack.DoneWrites = DoneWrites  # type: ignore[misc]
                    outcomes.append(
                        {
                            "program": program,
                            "form": form,
                            "seconds_per_shard": sorted(costs)[len(costs) // 2],
                        }
                    )
                    print(outcomes[-1], flush=True)
        finally:
            store.get_conn().delete_container()
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "round_trip_seconds": args.round_trip,
        "shards": args.shards,
        "work_seconds": args.work,
        "repeats": args.repeats,
        "outcomes": outcomes,
    }


def table(result: dict[str, Any]) -> str:
    rows = ["| program | form | SDK cost per shard (ms) |", "|---|---|---|"]
    for o in result["outcomes"]:
        rows.append(f"| {o['program']} | {o['form']} | {o['seconds_per_shard'] * 1000:.1f} |")
    return (
        f"{result['when']}, {result['machine']}; a pack of {result['shards']} shards of "
        f"{result['work_seconds']} s against Azurite, each answer held {result['round_trip_seconds']} s; "
        f"median of {result['repeats']} packs.\n\n" + "\n".join(rows) + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--work", type=float, default=0.1)
    parser.add_argument("--round-trip", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="sdk_pack_cost")
    args = parser.parse_args()
    load_devcluster_env()
    result = run(args)
    write_results(args.name, result, table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
