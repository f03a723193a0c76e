"""One system's night on the bed's real Airflow deployment: queues, identity, DAGs, the run, the faults and
the probes, then every record gathered into one ``PhaseRecord`` (plain data, written as JSON).

The order of a phase: a fresh database and deployment (PostgreSQL, API server, scheduler, DAG processor, two
triggerers), both teams' queues, the DAG files, then the genomics run; the risk run ``risk_delay`` later;
Spot evictions through the night; one triggerer killed at ``triggerer_kill_at`` of the ideal and started
again ``triggerer_down`` seconds later (its triggers are taken over meanwhile); the UI read between 30 %
and 70 % of the ideal. The phase ends when both runs have ended (or at ``timeout``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..cluster import Cluster, short_id
from ..deployment import TEMPLATE_DB, AirflowDeployment, Postgres
from .bed import NightBed
from .dags import GENOMICS_DAG_ID, RISK_DAG_ID, genomics_dag, genomics_pool, risk_dag, risk_pool
from .done_records import DoneRecords
from .probes import (
    ApiserverCounter,
    BlobRequestCounter,
    PodEvictions,
    ProcessSampler,
    QuotaSampler,
    SpotEvictions,
    UiReader,
    ui_paths,
)
from .recorder import ClusterRecorder
from .workload import Night

FAST_FAILOVER = {"triggerer.job_heartbeat_sec": "2", "triggerer.triggerer_health_check_threshold": "12"}


@dataclass(frozen=True)
class PhaseOptions:
    system: str  # "ours" | "cncf"
    evictions: bool = True
    pod_evictions_every: float = 0.0  # > 0: one running pod evicted this often instead of whole Spot nodes
    kill_triggerer: bool = True
    triggerer_kill_at: float = 0.5  # of the ideal, after the genomics run starts
    triggerer_down: float = 20.0
    ui_per_second: float = 2.0
    discover_pods_retry_number: int = 500  # the cncf operator's immediate pod lists after create
    timeout_factor: float = 6.0  # the phase gives up at this times the ideal (and at least 15 min)
    parallelism: int = 16  # LocalExecutor's worker processes
    night: int = 1  # the system's n-th night of the run: later nights keep the earlier nights' shard history
    done_records: bool = False  # ours: the bed writes the SDK's done records of each succeeded fake pod
    hand_off: bool = True  # with done_records: a stopped pod's rest taken over by its Job's running pods


@dataclass
class PhaseRecord:
    system: str
    run_id: str
    risk_run_id: str
    started: float
    risk_started: float
    ended: float
    states: dict[str, dict[str, int]]
    task_instances: list[dict[str, Any]]
    results: dict[str, Any]  # "dag|task|map" -> the XCom result (ours)
    pods: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    timeline: list[dict[str, Any]]  # {"at", "running": {series: pods}}
    evictions: list[dict[str, Any]]
    ui: list[dict[str, Any]]
    processes: list[dict[str, Any]]
    quota: list[dict[str, Any]]
    apiserver: dict[str, Any]
    postgres: dict[str, int]
    trigger_fired: dict[str, float]  # "dag|task|map|try" -> first "Trigger fired event"
    triggerer_kill: dict[str, float] = field(default_factory=dict)
    recorder_errors: list[str] = field(default_factory=list)
    blob_requests: list[float] = field(default_factory=list)  # when each Blob request of Airflow's passed
    queues: dict[str, str] = field(default_factory=dict)
    cluster_queues: list[str] = field(default_factory=list)
    kept_by_done_records: dict[str, float] = field(default_factory=dict)  # stopped pod -> records' seconds
    handed_off: int = 0  # shards a stopped pod released that a running pod of its Job took over
    grace_exits: int = 0  # evicted pods that ended Succeeded: their rest finished by others in their grace
    records_existing: int = 0  # done records the bed found already written (two pods ran one shard)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pg_counters(deployment: AirflowDeployment) -> dict[str, int]:
    rows = deployment.sql(
        "SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated, "
        "tup_deleted "
        "FROM pg_stat_database WHERE datname = current_database()"
    )
    keys = ("commits", "rollbacks", "returned", "fetched", "inserted", "updated", "deleted")
    return dict(zip(keys, (int(v) for v in rows[0]), strict=True)) if rows else {}


def fired_times(home: Path) -> dict[str, float]:
    """The first "Trigger fired event" of each trigger ("dag|task|map|try" -> when), from the JSON logs
    (each trigger's own log file under the task's log folder, and the triggerers' main logs)."""
    from datetime import datetime

    out: dict[str, float] = {}
    logs = home / "logs"
    for path in sorted([*logs.glob("dag_id=*/**/*.log.trigger.*.log"), *logs.glob("triggerer-*.log")]):
        for line in path.read_text(errors="replace").splitlines():
            if "Trigger fired event" not in line:
                continue
            try:
                entry = json.loads(line)
                at = datetime.fromisoformat(str(entry["timestamp"]).replace("Z", "+00:00")).timestamp()
            except (ValueError, KeyError, TypeError):
                continue
            parts = str(entry.get("name", "")).split(" ", 1)[0].split("/")
            if len(parts) >= 5:
                dag, _run, task, map_index, try_number = parts[:5]
                key = f"{dag}|{task}|{map_index}|{try_number}"
                out[key] = min(out.get(key, at), at)
    return out


def run_phase(
    night: Night,
    options: PhaseOptions,
    *,
    cluster: Cluster,
    bed: NightBed,
    postgres: Postgres,
    cluster_env: dict[str, str],
    home: Path,
    metrics: tuple[str, Path],
    log: Any = print,
) -> PhaseRecord:
    system = options.system
    ideal = night.ideal()
    queues = bed.create_queues(night, system, options.night)
    cqs = bed.cluster_queues[-2:]
    flow_schema, conn = bed.airflow_identity(home, system)
    ui_flow_schema, ui_conn = bed.airflow_identity(home, system, "airflow-ui")
    database = f"night_{system}_{short_id()}"
    postgres.create_database(database, template=TEMPLATE_DB)
    config = {
        **FAST_FAILOVER,
        "core.parallelism": str(options.parallelism),
        "triggerer.capacity": "10000",
        "kueue.kubernetes_conn_id": "kueue_ui",  # the Kueue pages' own identity, counted apart
    }
    deployment = AirflowDeployment.create(
        home / f"airflow-{system}-{options.night}", postgres, database, cluster_env, config=config
    )
    azurite = cluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    blob_port = re.search(r"BlobEndpoint=http://[^:/]+:(\d+)/", azurite)
    if blob_port is None:
        raise ValueError(f"no BlobEndpoint with a port in the bed's connection string: {azurite!r}")
    blob_counter = BlobRequestCounter("127.0.0.1", int(blob_port.group(1))).start()
    wasb = {"conn_type": "wasb", "extra": {"connection_string": blob_counter.connection_string(azurite)}}
    blob = json.dumps(wasb)
    deployment.env.update(
        {
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": conn,
            "AIRFLOW_CONN_KUEUE_UI": ui_conn,
            "AIRFLOW_CONN_KUEUE_BLOB_DEFAULT": blob,
        }
    )
    deployment.write_env_file()
    ours_done = options.done_records and system == "ours"
    done = DoneRecords.connect(azurite, cluster.api, hand_off=options.hand_off) if ours_done else None
    recorder = ClusterRecorder(
        cluster.api,
        [queues.genomics_namespace, queues.risk_namespace],
        pod_events=done,
    )
    counter = ApiserverCounter(metrics[0], metrics[1], flow_schema, ui_flow_schema)
    threads: list[Any] = []
    try:
        deployment.start(triggerers=2)
        log(f"[{system}] deployment up at {deployment.url}")
        if system == "cncf":  # Airflow's pools stand in for the quota: a Job that waits in Kueue fails it
            for pool, slots in (
                (genomics_pool(), night.shape.genomics_cpu),
                (risk_pool(), night.shape.risk_cpu),
            ):
                deployment.rest.request(
                    "POST", "/api/v2/pools", json={"name": pool, "slots": slots, "include_deferred": True}
                )
        kw = {"discover_pods_retry_number": options.discover_pods_retry_number}
        deployment.write_dag(GENOMICS_DAG_ID, genomics_dag(night, queues, system, **kw))
        deployment.write_dag(RISK_DAG_ID, risk_dag(night, queues, system, **kw))
        deployment.rest.wait_for_dag(GENOMICS_DAG_ID, timeout=300)
        deployment.rest.wait_for_dag(RISK_DAG_ID, timeout=300)
        recorder.start()
        quota = QuotaSampler(cluster, cqs)
        procs = ProcessSampler(
            lambda: {n: c.pid for n, c in deployment.components.items() if c.pid and c.alive()}
        )
        threads += [quota, procs]
        for t in threads:
            t.start()
        before_api, before_pg = counter.scrape(), _pg_counters(deployment)
        run_id = deployment.rest.trigger(GENOMICS_DAG_ID)
        started = time.time()
        log(f"[{system}] genomics run {run_id}: ideal {ideal:.0f} s, deadline {night.deadline_seconds()} s")
        evictions: SpotEvictions | PodEvictions | None = None
        if options.pod_evictions_every > 0:
            evictions = PodEvictions(
                cluster,
                [queues.genomics_namespace],
                options.pod_evictions_every,
                night.shape.seed,
                slots=night.shape.genomics_cpu,
                before_evict=done.before_eviction if done is not None else None,
            )
            evictions.start()
            threads.append(evictions)
        elif options.evictions and night.eviction_interval() < 1e9:
            evictions = SpotEvictions(
                cluster,
                bed.spot_nodes,
                night.eviction_interval(),
                night.replacement_seconds(),
                night.shape.seed,
                home / f"spot-{system}.log",
            )
            evictions.start()
            threads.append(evictions)
        token_box: dict[str, str] = {}

        def token() -> str:
            if "t" not in token_box or time.time() - float(token_box.get("at", "0")) > 600:
                token_box["t"], token_box["at"] = deployment.rest.login(), str(time.time())
            return token_box["t"]

        live = {"paths": []}  # type: dict[str, list[str]]
        ui = UiReader(deployment.url, token, lambda: live["paths"], options.ui_per_second)
        risk_run_id, risk_started, ui_started, kill = "", 0.0, False, {}
        timeline: list[dict[str, Any]] = []
        deadline = started + max(900.0, ideal * options.timeout_factor)
        next_look = 0.0
        while time.time() < deadline:
            now = time.time()
            timeline.append({"at": now, "running": recorder.running_now()})
            if not risk_run_id and now - started >= ideal * night.shape.risk_delay_fraction:
                risk_run_id, risk_started = deployment.rest.trigger(RISK_DAG_ID), time.time()
                log(f"[{system}] risk run {risk_run_id} at {risk_started - started:.0f} s")
            if not ui_started and now - started >= 0.3 * ideal:
                live["paths"] = ui_paths(GENOMICS_DAG_ID, run_id, ["sample.call", "sample.align"], 0)
                ui.start()
                ui_started = True
            if ui_started and ui.is_alive() and now - started >= 0.7 * ideal:
                ui.stop()
            if options.kill_triggerer and not kill and now - started >= ideal * options.triggerer_kill_at:
                kill["at"] = time.time()
                deployment.kill("triggerer-1")
                log(f"[{system}] killed triggerer-1 at {kill['at'] - started:.0f} s")
            if kill and "back" not in kill and time.time() - kill["at"] >= options.triggerer_down:
                deployment.start_triggerer("triggerer-1")
                kill["back"] = time.time()
                log(f"[{system}] triggerer-1 back at {kill['back'] - started:.0f} s")
            if now >= next_look:
                next_look = now + 5
                deployment.check_alive()
                ended = [
                    deployment.rest.dag_run(d, r)["state"] in ("success", "failed")
                    for d, r in ((GENOMICS_DAG_ID, run_id), (RISK_DAG_ID, risk_run_id))
                    if r
                ]
                if risk_run_id and all(ended):
                    break
            time.sleep(1)
        ended_at = time.time()
        if ui.is_alive():
            ui.stop()
        for t in threads:
            t.stop()
        after_api, after_pg = counter.scrape(), _pg_counters(deployment)
        time.sleep(2)
        recorder.stop()
        if done is not None:
            done.close()
            log(
                f"[{system}] done records written for the fake pods: {done.written}; pods given only "
                f"their shards without one: {done.remainders}"
            )
        pods, jobs, workloads = recorder.snapshot()
        runs = {GENOMICS_DAG_ID: run_id, RISK_DAG_ID: risk_run_id}
        tis = _task_instances(deployment, runs)
        record = PhaseRecord(
            system=system,
            run_id=run_id,
            risk_run_id=risk_run_id,
            started=started,
            risk_started=risk_started,
            ended=ended_at,
            states={
                GENOMICS_DAG_ID: deployment.rest.states(GENOMICS_DAG_ID, run_id),
                RISK_DAG_ID: deployment.rest.states(RISK_DAG_ID, risk_run_id) if risk_run_id else {},
            },
            task_instances=tis,
            results=_results(deployment, system, runs, tis),
            pods=[asdict(p) for p in pods],
            jobs=[asdict(j) for j in jobs],
            workloads=[asdict(w) for w in workloads],
            timeline=timeline,
            evictions=[asdict(e) for e in evictions.evictions] if evictions else [],
            ui=[asdict(r) for r in ui.reads],
            processes=[asdict(s) for s in procs.samples],
            quota=[asdict(s) for s in quota.samples],
            apiserver={
                "total": after_api.total - before_api.total,
                "airflow": after_api.airflow - before_api.airflow,
                "ui": after_api.ui - before_api.ui,
                "airflow_by": {
                    k: v - before_api.airflow_by.get(k, 0)
                    for k, v in after_api.airflow_by.items()
                    if v - before_api.airflow_by.get(k, 0) > 0
                },
                "by_verb_resource": {
                    k: v - before_api.by_verb_resource.get(k, 0)
                    for k, v in after_api.by_verb_resource.items()
                    if v - before_api.by_verb_resource.get(k, 0) > 0
                },
            },
            postgres={k: v - before_pg.get(k, 0) for k, v in after_pg.items()},
            trigger_fired=fired_times(deployment.home),
            triggerer_kill={k: v - started for k, v in kill.items()},
            recorder_errors=(recorder.errors + (done.errors if done is not None else []))[:50],
            **(done.phase_fields() if done is not None else {}),  # kept_by_done_records, handed_off, ...
            blob_requests=list(blob_counter.stamps),
            queues=asdict(queues),
            cluster_queues=cqs,
        )
        return record
    finally:
        for t in threads:
            if t.is_alive():
                t.stop()
        recorder.stop()
        deployment.stop()
        blob_counter.stop()
        bed.drop_phase()


def _task_instances(deployment: AirflowDeployment, runs: dict[str, str]) -> list[dict[str, Any]]:
    keep = (
        "dag_id",
        "task_id",
        "map_index",
        "state",
        "try_number",
        "queued_when",
        "scheduled_when",
        "start_date",
        "end_date",
    )
    return [
        {k: ti.get(k) for k in keep}
        for dag_id, run_id in runs.items()
        if run_id
        for ti in deployment.rest.task_instances(dag_id, run_id)
    ]


def _results(
    deployment: AirflowDeployment, system: str, runs: dict[str, str], tis: list[dict[str, Any]]
) -> dict[str, Any]:
    """Each succeeded task's XCom result (ours only: the cncf operator returns none)."""
    if system != "ours":
        return {}
    out: dict[str, Any] = {}
    for ti in tis:
        dag_id = ti["dag_id"]
        run_id = runs[dag_id]
        if ti["state"] != "success":
            continue
        try:
            value = deployment.rest.xcom(dag_id, run_id, ti["task_id"], ti["map_index"])
        except Exception as exc:
            value = {"error": str(exc)[:200]}
        keep = (
            "completed_indexes",
            "failed_indexes",
            "evictions",
            "estimated_cost_usd",
            "deadline",
            "attempts",
            "retried_shards",
            "queued_seconds",
            "running_seconds",
            "forecast",
            "deadline_outcome",
            "shard_history",
        )
        out[f"{dag_id}|{ti['task_id']}|{ti['map_index']}"] = (
            {k: value.get(k) for k in keep} if isinstance(value, dict) else value
        )
    return out
