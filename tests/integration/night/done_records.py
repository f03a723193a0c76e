"""The worker SDK's done records for the night's fake pods (``--done-records``): KWOK runs no program, so the
bed writes, for each of ours' pods that succeeds, the ``done.json`` its shards' SDK would have written before
the pod ended (``run_seconds``: each shard's drawn length, from the pod's ``shard-durations`` annotation).

The operator then learns each shard's length from done records, as it does for a worker-SDK program, and a
later night packs from them (``docs/shard-history.md``); without them a fake pod's times serve the forecast
only. A record goes out a few milliseconds after the pod's Succeeded is seen, not before the pod ends as the
SDK's does: one the operator lists before it lands is a shard it does not learn that night.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_kueue_provider.kueue.checkpoints.shard_blob_names import done_name
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_URL_ENV,
    INDEX_ANNOTATION,
    SHARDS_ENV,
    SHARDS_PER_POD_ENV,
)
from airflow_kueue_provider.worker.checkpoint_store import CHECKPOINT_FORMAT, now_text
from devcluster.fake_pod_lengths import SHARD_DURATIONS_ANNOTATION


def pod_env(pod: dict[str, Any]) -> dict[str, str]:
    """The main container's plain env values (a Secret's ``valueFrom`` is left out)."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return {e["name"]: e["value"] for e in containers[0].get("env") or [] if "value" in e}


def shards_run_by(pod: dict[str, Any]) -> list[tuple[int, float]] | None:
    """``[(shard id, seconds)]`` a fake pod ran (its index's pack, in order), or None for a pod without the
    SDK's env or the per-shard lengths."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    lengths, index = annotations.get(SHARD_DURATIONS_ANNOTATION), annotations.get(INDEX_ANNOTATION)
    env = pod_env(pod)
    if not lengths or index is None or SHARDS_ENV not in env:
        return None
    seconds = [float(s) for s in lengths.split(",")]
    packs = ShardPacks.parse(IndexSet.parse(env[SHARDS_ENV]), env.get(SHARDS_PER_POD_ENV) or "1")
    return [(shard, seconds[shard]) for shard in packs.run_order_of_index(int(index))]


class DoneRecords:
    """Writes the done records of each succeeded pod once, on a few threads (``pod_succeeded`` is called
    from the recorder's watch thread and returns at once)."""

    def __init__(self, connection_string: str) -> None:
        from azure.storage.blob import BlobServiceClient

        # the SDK logs every request's headers at INFO: the night's output is its table, not them
        logging.getLogger("azure.core.pipeline.policies.http_logging_policy").setLevel(logging.WARNING)
        self._service = BlobServiceClient.from_connection_string(connection_string)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="night-done")
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self.written = 0
        self.errors: list[str] = []

    def pod_succeeded(self, pod: dict[str, Any]) -> None:
        uid = (pod.get("metadata") or {}).get("uid", "")
        with self._lock:
            if uid in self._seen:
                return
            self._seen.add(uid)
        ran, env = shards_run_by(pod), pod_env(pod)
        url, prefix = env.get(CHECKPOINT_URL_ENV), env.get(CHECKPOINT_PREFIX_ENV)
        if ran is None or not url or prefix is None:
            return
        container, prefix = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1], prefix.strip("/")
        index = int(pod["metadata"]["annotations"][INDEX_ANNOTATION])
        self._pool.submit(self._write, container, prefix, index, ran)

    def _write(self, container: str, prefix: str, index: int, ran: list[tuple[int, float]]) -> None:
        from azure.core.exceptions import ResourceExistsError

        client = self._service.get_container_client(container)
        for shard, seconds in ran:
            doc = {
                "format": CHECKPOINT_FORMAT, "shard_id": shard, "index": index, "finished_at": now_text(),
                "output": {}, "run_seconds": seconds,
            }  # fmt: skip
            try:  # the first record is kept, as the SDK's if-none-match write keeps it
                client.upload_blob(done_name(prefix, shard), json.dumps(doc), overwrite=False)
                with self._lock:
                    self.written += 1
            except ResourceExistsError:
                pass
            except Exception as exc:  # recorded, never the night's end
                with self._lock:
                    if len(self.errors) < 50:
                        self.errors.append(f"done record of shard {shard} in {container}/{prefix}: {exc}")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
