"""What the eviction tests (``test_eviction_end_to_end.py``) and ``benchmarks/eviction_loss.py`` share.

Queues over the process nodes, the Monte Carlo pricer as a shard program, and what really happened, read
from three witnesses that do not depend on each other: the items log (which pod processed which item, written
by the program), the process nodes' journals (starts, signals, exits, written by the node) and the shards'
done records in Blob Storage (the deterministic outputs).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from example_dags.shard_programs.monte_carlo_pricer import make_work, parser
from example_dags.shard_programs.shard_loop import LoggedItem, expected_output, parse_items_log

from ..cluster import Cluster
from ..process_node import journal, state_dir

PRICER = "example_dags.shard_programs.monte_carlo_pricer"
PRICER_OPTIONS = ("--paths", "16", "--steps", "16")  # ~1 ms of work per item: --item-seconds paces it


def pricer_arguments(items_log: Path, *, items: int, every: int, item_seconds: float) -> list[str]:
    return ["--items", str(items), "--checkpoint-every", str(every), "--item-seconds", str(item_seconds),
            "--items-log", str(items_log), *PRICER_OPTIONS]  # fmt: skip


def expected_pricer_output(shard_id: int, items: int) -> dict[str, Any]:
    """What a pricer shard run with ``PRICER_OPTIONS`` records in ``done.json``, however it was evicted."""
    work = make_work(parser().parse_args(["--items", "1", "--items-log", "-", *PRICER_OPTIONS]))
    return expected_output("monte_carlo_pricer", work, shard_id, items)


def command_job(
    name: str, queue: str, command: list[str], *, pods: int, cpu: str, priority: str | None = None,
    env: dict[str, str] | None = None, grace: int = 30, spot_policy: bool = True, retries_per_index: int = 2,
) -> dict[str, Any]:  # fmt: skip
    """A plain Indexed Job (``pods`` indexes, all at once) whose container runs ``command`` on the process
    nodes. With ``spot_policy``, a pod evicted with a DisruptionTarget condition does not count as a failure
    (as the operator's ``spot=True`` does)."""
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    spec: dict[str, Any] = {
        "suspend": True,
        "completionMode": "Indexed",
        "completions": pods,
        "parallelism": pods,
        "backoffLimitPerIndex": retries_per_index,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": grace,
                "containers": [
                    {
                        "name": "main",
                        "image": "example.invalid/procnode:1",
                        "command": command,
                        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                        "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}},
                    }
                ],
            }
        },
    }
    if spot_policy:
        rule = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
        spec["podFailurePolicy"] = {"rules": [rule]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


@dataclass
class PodRecord:
    """One pod of a Job as the process node's journal saw it."""

    pod: str  # namespace/name
    uid: str
    node: str
    index: int | None
    started: float | None = None
    signals: list[tuple[str, float]] = field(default_factory=list)
    exit_code: int | None = None
    exited: float | None = None


def pod_records(cluster: Cluster, job: str, namespace: str) -> dict[str, PodRecord]:
    """Every pod of ``job`` that ran on a process node, by ``namespace/name``, from the nodes' journals (of
    every node that ever ran here: a deleted node's journal stays)."""
    records: dict[str, PodRecord] = {}
    for node in sorted(p.name for p in state_dir().iterdir() if (p / "journal.jsonl").exists()):
        for event in journal(node):
            if event.get("job") != job or not str(event.get("pod", "")).startswith(f"{namespace}/"):
                continue
            rec = records.setdefault(
                event["pod"], PodRecord(event["pod"], event["uid"], node, event.get("index"))
            )
            if event["event"] == "start":
                rec.started = event["t"]
            elif event["event"] == "signal":
                rec.signals.append((event["signal"], event["t"]))
            elif event["event"] == "exit":
                rec.exit_code, rec.exited = event.get("exit_code"), event["t"]
    return records


def read_items_log(path: Path) -> list[LoggedItem]:
    return parse_items_log(path.read_text()) if path.exists() else []


def items_per_shard(logged: Iterable[LoggedItem]) -> dict[int, int]:
    counts: dict[int, int] = collections.Counter(e.shard for e in logged)
    return counts


@dataclass(frozen=True)
class Accounting:
    """Each (shard, item) of the run: missing ones (lost work), and those processed more than once."""

    missing: list[tuple[int, int]]
    repeated: dict[tuple[int, int], int]


def account(logged: Iterable[LoggedItem], shards: Iterable[int], items: int) -> Accounting:
    counts = collections.Counter((e.shard, e.item) for e in logged)
    expected = [(s, i) for s in shards for i in range(items)]
    return Accounting(
        missing=[k for k in expected if not counts[k]],
        repeated={k: n for k, n in counts.items() if n > 1},
    )


def pod_spans(logged: Iterable[LoggedItem]) -> dict[str, tuple[int, int, int]]:
    """Per pod name: ``(shard, first item, last item)`` it logged."""
    spans: dict[str, tuple[int, int, int]] = {}
    for e in logged:
        shard, first, _ = spans.get(e.pod, (e.shard, e.item, e.item))
        spans[e.pod] = (shard, first, e.item)
    return spans


def shard_spans(logged: Iterable[LoggedItem]) -> dict[tuple[str, int], tuple[int, int]]:
    """Per (pod name, shard): the first and last item the pod logged of it (a pod that took a stopped
    pod's shard over logs two shards, ``worker/pack_handoff``)."""
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for e in logged:
        first, _ = spans.get((e.pod, e.shard), (e.item, e.item))
        spans[(e.pod, e.shard)] = (first, e.item)
    return spans


def done_records(blob_service: Any, base_container: str) -> dict[int, dict[str, Any]]:
    """``shard id -> done.json`` of every shard in the task instance's shard containers (its ``index``: the
    pod index that wrote it, another index's for a shard taken over from a stopped pod)."""
    records: dict[int, dict[str, Any]] = {}
    for container in blob_service.list_containers(name_starts_with=base_container):
        client = blob_service.get_container_client(container.name)
        for blob in client.list_blobs():
            parts = blob.name.split("/")
            if parts[-1] == "done.json" and parts[-3] == "shards":
                records[int(parts[-2])] = json.loads(client.download_blob(blob.name).readall())
    return records


def done_outputs(blob_service: Any, base_container: str) -> dict[int, dict[str, Any]]:
    """``shard id -> output`` of every ``done.json`` in the task instance's shard containers."""
    return {shard: doc["output"] for shard, doc in done_records(blob_service, base_container).items()}
