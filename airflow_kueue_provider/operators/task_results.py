"""Shard outputs read from their done records before the clean-up: ``@task.kueue``'s return values
(``collect_results``) and the operator's ``shard_outputs=True`` (``collect_shard_outputs``). Small ones go
into the task's result (its XCom); large ones stay in Blob and the result says where."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from ..kueue.checkpoints.shard_blob_names import DONE_BLOB, done_name, shards_folder
from .checkpointing import CheckpointSession

INLINE_RESULTS_BYTES = 48 * 1024
"""Up to this much JSON, the results (or outputs) go into the task's result (its XCom); above, into Blob."""
READERS = 8
OUTPUTS_KEY = "shard_outputs"
OUTPUTS_BLOB_KEY = "shard_outputs_blob"
OUTPUTS_COUNT_KEY = "shard_outputs_count"


@dataclass(frozen=True)
class ShardOutputsBlob:
    """Where outputs too large for XCom stay: shard ``i``'s is ``output`` in
    ``<container>/<folder><i>/<record>`` (its ``mark_done`` record, kept after success)."""

    container: str
    folder: str
    record: str = DONE_BLOB

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def blob_name(self, shard_id: int) -> str:
        return f"{self.folder}{shard_id}/{self.record}"


def _read_outputs(session: CheckpointSession, pick: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """``{"<shard id>": pick(its done record's output)}`` for every done shard."""
    done = list(session.done_shards())
    with session.hook.container_hook(session.shard_container) as container:

        def read(shard_id: int) -> tuple[str, Any]:
            doc, _ = container.read_json(done_name(session.prefix, shard_id))
            return str(shard_id), pick((doc or {}).get("output") or {})

        with ThreadPoolExecutor(max_workers=READERS) as pool:
            return dict(pool.map(read, done))


def collect_results(session: CheckpointSession) -> dict[str, Any]:
    """``{"results": {"<shard id>": value}}``, or ``{"results_blob": "<container>/<name>",
    "results_count": n}`` when they are too large for an XCom."""
    results = _read_outputs(session, lambda output: output.get("result"))
    if len(json.dumps(results)) <= INLINE_RESULTS_BYTES:
        return {"results": results}
    name = f"{session.prefix.strip('/')}/results.json"
    with session.hook.container_hook(session.shard_container) as container:
        container.write_json(name, {"results": results})
    return {"results_blob": f"{session.shard_container}/{name}", "results_count": len(results)}


def collect_shard_outputs(session: CheckpointSession) -> dict[str, Any]:
    """``{"shard_outputs": {"<shard id>": output}}`` (each done record's ``mark_done`` output), or, when they
    are too large for an XCom, ``{"shard_outputs_blob": ShardOutputsBlob.to_dict(), "shard_outputs_count":
    n}``: the records are then kept (``keeps_records``)."""
    outputs = _read_outputs(session, dict)
    if len(json.dumps(outputs)) <= INLINE_RESULTS_BYTES:
        return {OUTPUTS_KEY: outputs}
    where = ShardOutputsBlob(session.shard_container, shards_folder(session.prefix))
    return {OUTPUTS_BLOB_KEY: where.to_dict(), OUTPUTS_COUNT_KEY: len(outputs)}


def keeps_records(result: dict[str, Any]) -> bool:
    """Whether the result points at the shards' records (they must survive the clean-up)."""
    return OUTPUTS_BLOB_KEY in result
