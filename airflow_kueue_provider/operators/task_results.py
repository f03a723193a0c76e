"""``@task.kueue``'s results: each shard's return value, read from its done record before the clean-up, into
the task's result (small ones), or into one ``results.json`` blob whose address the result gives (large
ones: it stays after the shards' checkpoints are deleted)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..kueue.checkpoints.shard_blob_names import done_name
from .checkpointing import CheckpointSession

INLINE_RESULTS_BYTES = 48 * 1024
"""Up to this much JSON, the results go into the task's result (its XCom); above, into a blob."""
READERS = 8


def collect_results(session: CheckpointSession) -> dict[str, Any]:
    """``{"results": {"<shard id>": value}}``, or ``{"results_blob": "<container>/<name>",
    "results_count": n}`` when they are too large for an XCom."""
    done = list(session.done_shards())
    with session.hook.container_hook(session.shard_container) as container:

        def read(shard_id: int) -> tuple[str, Any]:
            doc, _ = container.read_json(done_name(session.prefix, shard_id))
            return str(shard_id), ((doc or {}).get("output") or {}).get("result")

        with ThreadPoolExecutor(max_workers=READERS) as pool:
            results = dict(pool.map(read, done))
        if len(json.dumps(results)) <= INLINE_RESULTS_BYTES:
            return {"results": results}
        name = f"{session.prefix.strip('/')}/results.json"
        container.write_json(name, {"results": results})
    return {"results_blob": f"{session.shard_container}/{name}", "results_count": len(results)}
