"""A task's shard history in Blob Storage, next to its ledgers: read, and merged a night at a time with
ETag-conditional writes (as the ledger is).

One blob per (dag, task, map index) in the checkpoint base container, under ``.shard-history/`` (no dag's
ledger prefix starts with a dot: ``path_segment`` encodes it), so the history outlives the runs whose
ledgers the sweep deletes, and deleting the blob clears it. A merge reads the blob and its ETag, merges the
night, and writes only if the ETag still matches (or, for a new history, only if none exists); on a
conflict it reads again and merges again. Transient faults are retried by the hook, as for the ledger.
Content this version did not write is ignored and replaced, never acted on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..kueue.checkpoints.ledger import path_segment
from ..kueue.checkpoints.shard_history import ShardHistory
from ..kueue.errors import KueueProviderError
from ..kueue.index_set import IndexSet
from ..storage.blob_errors import BlobConfigError, BlobStoreError, BlobUnavailable
from .blob_store import BlobPreconditionFailed, BlobStoreHook

HISTORY_FOLDER = ".shard-history"
MAX_HISTORY_CONFLICTS = 10


class HistoryConflict(RuntimeError, KueueProviderError):
    """Every conditional write of the history lost to a concurrent one, MAX_HISTORY_CONFLICTS times."""


def history_blob(dag_id: str, task_id: str, map_index: int = -1) -> str:
    """``.shard-history/<dag>/<task>/<map index>.json``, each id one ``path_segment``."""
    return f"{HISTORY_FOLDER}/{path_segment(dag_id)}/{path_segment(task_id)}/{int(map_index)}.json"


class ShardHistoryStore:
    """The shard history of one task (``dag_id``, ``task_id``, ``map_index``) in ``hook``'s container."""

    def __init__(self, hook: BlobStoreHook, dag_id: str, task_id: str, map_index: int = -1) -> None:
        self.hook = hook
        self.name = history_blob(dag_id, task_id, map_index)

    def _read(self) -> tuple[ShardHistory | None, str | None]:
        """The history and its ETag; a blob that is not JSON is deleted (then there is none)."""
        try:
            data, etag = self.hook.read_json(self.name)
        except (BlobUnavailable, BlobConfigError):
            raise
        except BlobStoreError:  # not a JSON object: nobody can use it; the next write starts over
            self.hook.delete(self.name)
            return None, None
        return (ShardHistory.from_json(data) if data is not None else None), etag

    def read(self) -> ShardHistory | None:
        """The task's history, or None (none yet, or content this version does not read)."""
        return self._read()[0]

    def merge_night(
        self,
        run_id: str,
        shard_count: int,
        durations: Mapping[int, float],
        resumed: IndexSet | None = None,
        pod_start: float | None = None,
        from_pods: bool = False,
    ) -> ShardHistory:
        """Merge night ``run_id``'s shard lengths (``ShardHistory.merge_night``) and write it back."""
        return self._merge(
            shard_count,
            lambda h: h.merge_night(run_id, shard_count, durations, resumed, pod_start, from_pods),
        )

    def merge_wait_error(self, run_id: str, shard_count: int, seconds: float) -> ShardHistory:
        """Merge night ``run_id``'s forecast error (``ShardHistory.merge_wait_error``) and write it back."""
        return self._merge(shard_count, lambda h: h.merge_wait_error(run_id, shard_count, seconds))

    def _merge(self, shard_count: int, merge: Callable[[ShardHistory], ShardHistory]) -> ShardHistory:
        """Read, ``merge``, write if the ETag still matches (else read theirs and merge again)."""
        for _ in range(MAX_HISTORY_CONFLICTS):
            current, etag = self._read()
            merged = merge(current or ShardHistory.empty(shard_count))
            if merged == current:
                return merged  # a retry of a night already merged: nothing to write
            try:
                self.hook.write_json(self.name, merged.to_json(), if_match=etag, if_none_match=etag is None)
                return merged
            except BlobPreconditionFailed:
                continue  # another writer (a mapped sibling retried at once?): read theirs, merge again
        raise HistoryConflict(
            f"shard history {self.name} kept changing under {MAX_HISTORY_CONFLICTS} concurrent writes"
        )

    def clear(self) -> bool:
        """Forget the task's history (the next night starts it over); False if there was none."""
        return self.hook.delete(self.name)
