#!/usr/bin/env python
"""One team floods its namespace with Jobs that carry the provider's public ``managed-by`` label and big
annotations: what does the process running the shared watch hold, and does another team's task finish?

Workload: ``--jobs`` suspended Jobs (default 5,000) with ``app.kubernetes.io/managed-by:
airflow-kueue-provider`` and a ``--annotation-kib`` annotation (default 200 KiB) in team A's namespace, made
once, by 8 threads, with no queue label (Kueue leaves them alone, so they stay suspended). Then, for each
mode, a fresh process of its own (the hub's process, not an ``airflow triggerer``: the hub is the part that
holds the objects) runs two real ``KueueJobTrigger`` objects in one event loop: team B's, in a calm
namespace, and team A's, in the flooded one, each following a held Job of its own. The parent samples the
process's RSS every 0.2 s: *before* (team B followed, team A not yet), *peak*, *after* (team B's task
finished, team A's left).

Modes, same flood, same run:

- ``anchor``: the code without the bound: the hub's old slimming (managedFields and pod templates only), the
  LIST read whole before it, and no caps (``[kueue] watch_max_objects``/``watch_max_mib`` at 10^9);
- ``slim``: this checkout with the default caps (10,000 objects per kind, 128 MiB): kept metadata only, each
  LIST page slimmed as it arrives;
- ``capped``: this checkout with ``watch_max_objects`` = ``--cap`` (default 1,000, below the flood): team
  A's task must fail naming the cap, team B's finish.

No time compression: the flood is listed when team A's trigger joins (the hub's first LIST), as after any
restart or resync. 5,000 x 200 KiB is 1 GB of Jobs, and the Job controller writes each suspended Job once
more (its Suspended condition): the bed's etcd quota is 8 GiB for it (devcluster/components.py).
The anchor is this code with the bound taken out, in the same run (no public figure exists for it).

    .venv/bin/python benchmarks/watch_flood.py              # about 15 min
    .venv/bin/python benchmarks/watch_flood.py --jobs 200 --annotation-kib 50   # a try

Writes ``results/watch_flood.md`` and ``.json``; deletes both namespaces at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _path in (str(REPO), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from bed_env import load_devcluster_env, write_results  # noqa: E402

os.environ.setdefault("AIRFLOW__CORE__FERNET_KEY", "YWlyZmxvdy1rdWV1ZS1wcm92aWRlci10ZXN0LWtleSE=")
MODES = ("anchor", "slim", "capped")
UNCAPPED = "1000000000"
MARK = "@@watch_flood "  # the child's reports on stdout, among the triggers' log lines


def flood_job(i: int, annotation_kib: int) -> dict[str, Any]:
    from airflow_kueue_provider.kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE

    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"flood-{i}",
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
            "annotations": {"flood.example.com/blob": "x" * (annotation_kib * 1024)},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "example.invalid/x:1"}],
                }
            },
        },
    }


# ---- the hub's process ----------------------------------------------------------------------------------


def say(**what: Any) -> None:
    print(MARK + json.dumps(what), flush=True)


def child(mode: str, calm: list[str], flooded: list[str]) -> None:
    """Team B's trigger, then team A's (in the flood); reports phases on stdout, one JSON line each."""
    from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger
    from airflow_kueue_provider.watch import cache, namespace_watch
    from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch

    if mode == "anchor":

        def old_slim(obj: dict[str, Any]) -> dict[str, Any]:  # the hub's slimming before the bound
            (obj.get("metadata") or {}).pop("managedFields", None)
            spec = obj.get("spec") or {}
            spec.pop("template", None)
            for pod_set in spec.get("podSets") or []:
                if isinstance(pod_set, dict):
                    pod_set.pop("template", None)
            return obj

        cache.slim = old_slim  # the LIST whole, slimmed afterwards, as before the bound
        namespace_watch.slim = lambda obj: obj  # type: ignore[assignment]

    def hub(namespace: str) -> NamespaceWatch | None:
        return next((h for (_, ns), h in NamespaceWatch._hubs.items() if ns == namespace), None)

    async def run() -> None:
        def trigger(ns_job_queue: list[str]) -> KueueJobTrigger:
            ns, job, queue = ns_job_queue
            return KueueJobTrigger(job_name=job, namespace=ns, queue_name=queue)

        team_b = asyncio.create_task(trigger(calm).first_event())
        while not ((h := hub(calm[0])) and h.synced.is_set()):
            await asyncio.sleep(0.1)
        gc.collect()
        say(phase="before")
        await asyncio.sleep(2)
        started = time.monotonic()
        team_a = asyncio.create_task(trigger(flooded).first_event())
        flood_hub = None
        while not team_a.done():
            flood_hub = hub(flooded[0]) or flood_hub
            if flood_hub is not None and flood_hub.synced.is_set() and flood_hub.error is None:
                break
            await asyncio.sleep(0.05)
        listed = time.monotonic() - started
        held = {}
        if flood_hub:
            held = dict(jobs=len(flood_hub.slot("jobs")), retained_bytes=flood_hub.retained_bytes)
        outcome = team_a.result() if team_a.done() else None
        say(phase="flood-followed", seconds=round(listed, 1), team_a=outcome, **held)
        await asyncio.sleep(5)
        say(phase="release-b")
        event_b = await asyncio.wait_for(team_b, 300)
        if not team_a.done():
            team_a.cancel()
        await asyncio.gather(team_a, return_exceptions=True)
        flood_hub = None
        gc.collect()
        await asyncio.sleep(3)
        say(phase="after", team_b=event_b.get("status"))
        await asyncio.sleep(1)

    asyncio.run(run())


# ---- the parent -----------------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def submit(env: Any, task: str) -> str:
    from airflow_kueue_provider.hooks.kind_client import KindClient
    from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
    from airflow_kueue_provider.kueue.kinds.job import JOB
    from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
    from tests.integration.cluster import HOLD

    op = KueueIndexedJobOperator(
        task_id=task,
        namespace=env.namespace,
        queue_name=env.local_queue,
        image="example.invalid/shard:1",
        completions=1,
        annotations={"kwok.airflow-kueue.io/run-duration": "1s", **HOLD},
    )
    manifest = op.build_manifest(AirflowIdentity("watch_flood", task, f"run-{time.time_ns()}"))
    return str(KindClient(JOB, "kubernetes_default").create(manifest)["metadata"]["name"])


def run_mode(mode: str, calm: Any, flooded: Any, cap: int) -> dict[str, Any]:
    env = dict(os.environ)
    if mode == "anchor":
        env.update(AIRFLOW__KUEUE__WATCH_MAX_OBJECTS=UNCAPPED, AIRFLOW__KUEUE__WATCH_MAX_MIB=UNCAPPED)
    elif mode == "capped":
        env["AIRFLOW__KUEUE__WATCH_MAX_OBJECTS"] = str(cap)
    calm_job, flood_job_name = submit(calm, f"b-{mode}"), submit(flooded, f"a-{mode}")
    args = ["--calm", calm.namespace, calm_job, calm.local_queue]
    args += ["--flooded", flooded.namespace, flood_job_name, flooded.local_queue]
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", mode, *args], env=env, stdout=subprocess.PIPE, text=True
    )
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                samples.append((time.monotonic(), rss_mb(proc.pid)))
            except (OSError, ValueError):
                return
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result: dict[str, Any] = {"mode": mode}
    assert proc.stdout is not None
    for line in proc.stdout:
        if not line.startswith(MARK):
            continue
        report = json.loads(line[len(MARK) :])
        phase = report.pop("phase")
        now_rss = rss_mb(proc.pid)
        if phase == "before":
            result["rss_before_mb"] = round(now_rss, 1)
        elif phase == "flood-followed":
            result.update({f"flood_{k}": v for k, v in report.items()})
        elif phase == "release-b":
            calm.release_until_finished(calm_job)
        elif phase == "after":
            result["rss_after_mb"] = round(now_rss, 1)
            result["team_b"] = report["team_b"]
    proc.wait()
    done.set()
    sampler.join()
    result["rss_peak_mb"] = round(max(rss for _, rss in samples), 1)
    result["exit_code"] = proc.returncode
    team_a = result.get("flood_team_a")
    result["team_a"] = (team_a or {}).get("status", "still following")
    result["team_a_message"] = str((team_a or {}).get("message") or "")[:400]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--annotation-kib", type=int, default=200)
    parser.add_argument("--cap", type=int, default=1000, help="watch_max_objects of mode capped")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--name", default="watch_flood")
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--calm", nargs=3)
    parser.add_argument("--flooded", nargs=3)
    parser.add_argument("--table-only", action="store_true", help="rewrite the .md from the .json")
    a = parser.parse_args()
    if a.table_only:
        result = json.loads((HERE / "results" / f"{a.name}.json").read_text())
        anchor = next((r for r in result["runs"] if r["mode"] == "anchor"), None)
        write_results(a.name, result, table(result, anchor))
        return
    load_devcluster_env()
    if a.child:
        child(a.child, a.calm, a.flooded)
        return

    from kubernetes import config

    from tests.integration.cluster import Cluster, create_kueue_env, delete_kueue_env

    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    calm = create_kueue_env(cluster, "watch-flood-calm")
    flooded = create_kueue_env(cluster, "watch-flood")
    started = time.monotonic()
    try:
        t0 = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: flooded.create_job(flood_job(i, a.annotation_kib)), range(a.jobs)))
        flood_seconds = time.monotonic() - t0
        print(f"flood: {a.jobs} Jobs x {a.annotation_kib} KiB in {flood_seconds:.0f} s", flush=True)
        runs = []
        for mode in a.modes.split(","):
            runs.append(run_mode(mode, calm, flooded, a.cap))
            print(json.dumps(runs[-1]), flush=True)
    finally:
        for env in (flooded, calm):  # the Jobs first: a namespace of 1,500 Jobs was seen not to go away
            cluster.batch.delete_collection_namespaced_job(env.namespace, propagation_policy="Background")
            delete_kueue_env(env)
    anchor = next((r for r in runs if r["mode"] == "anchor"), None)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "jobs": a.jobs,
        "annotation_kib": a.annotation_kib,
        "cap": a.cap,
        "flood_create_seconds": round(flood_seconds, 1),
        "wall_seconds": round(time.monotonic() - started, 1),
        "runs": runs,
    }
    write_results(a.name, result, table(result, anchor))


def table(result: dict[str, Any], anchor: dict[str, Any] | None) -> str:
    lines = [
        f"# Watch flood, {result['when']}",
        "",
        f"{result['jobs']} suspended Jobs with the provider's `managed-by` label and a "
        f"{result['annotation_kib']} KiB annotation in team A's namespace (made in "
        f"{result['flood_create_seconds']} s); one process runs team B's and then team A's "
        "`KueueJobTrigger`; RSS of that process. Flood listed by the hub's first LIST (no time compression).",
        "",
        "| mode | RSS before | peak | after | growth after | Jobs held | retained (JSON) "
        "| vs anchor: retained / growth after | team A | team B |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in result["runs"]:
        growth = r.get("rss_after_mb", 0) - r.get("rss_before_mb", 0)
        held = r.get("flood_retained_bytes") or 0
        ratio = ""
        if anchor and r is not anchor:
            anchor_growth = anchor.get("rss_after_mb", 0) - anchor.get("rss_before_mb", 0)
            anchor_held = anchor.get("flood_retained_bytes") or 0
            kept = f"{anchor_held / held:.0f}x" if held else "all dropped"
            ratio = f"{kept} / {anchor_growth / max(growth, 1):.1f}x less"
        lines.append(
            f"| {r['mode']} | {r.get('rss_before_mb')} MB | {r['rss_peak_mb']} MB "
            f"| {r.get('rss_after_mb')} MB | {growth:.0f} MB | {r.get('flood_jobs', '-')} "
            f"| {held / 1024 / 1024:.1f} MiB | {ratio} | {r['team_a']} | {r.get('team_b')} |"
        )
    page_mib = 100 * int(result["annotation_kib"]) / 1024
    bound_mb = (128 + page_mib) * 1.048576  # watch_max_mib plus one LIST page, in MB
    checked = [r for r in result["runs"] if r["mode"] != "anchor"]
    held_all = all(r["rss_peak_mb"] - r["rss_before_mb"] <= bound_mb for r in checked)
    lines += [
        "",
        f"**Stated bound**: the hub process's RSS peak stays within its baseline plus `watch_max_mib` "
        f"(128 MiB) plus one LIST page (100 flood objects, {page_mib:.0f} MiB): +{bound_mb:.0f} MB. "
        "Measured: "
        + ", ".join(f"{r['mode']} +{r['rss_peak_mb'] - r['rss_before_mb']:.0f} MB" for r in checked)
        + f" ({'held' if held_all else 'NOT held'}); the anchor +"
        f"{(anchor or {}).get('rss_peak_mb', 0) - (anchor or {}).get('rss_before_mb', 0):.0f} MB. "
        "Team B's task finished in every mode.",
    ]
    lines += [
        "",
        "The bound: what a namespace's hub keeps is at most `[kueue] watch_max_mib` (128 MiB) of slimmed "
        "objects' JSON and `watch_max_objects` (10,000) of a kind; a slimmed flood Job is under 1 KiB "
        "whatever its annotations. The peak is bounded too: the hook slims each LIST page (100 objects) as "
        "it arrives and stops reading past `watch_max_objects` (`hooks/async_client._list_pages`), so a "
        "flood costs one page at a time, at each hub start or resync; the anchor read the whole LIST first.",
        "",
        "Team A's messages:",
        "",
    ]
    still = "(none: still following when team B finished)"
    lines += [f"- {r['mode']}: {r['team_a_message'] or still}" for r in result["runs"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
