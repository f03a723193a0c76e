"""The night's DAG files, as each team would write them: one for this provider, one for the cncf provider's
Kueue path (``KubernetesStartKueueJobOperator``), the same shape, queues, shards and fake lengths.

Genomics: one DAG run, a task group mapped over the samples (``.expand``), inside it align >> call >> gather
(each an Indexed Job of one shard per index, the shape's parallelism of pods at a time), each step at the
Kueue priority of the shape's step order (``STEP_ORDERS``). Risk: one task of ``risk_shards``.
The fake pods' lengths are per shard (``kwok.airflow-kueue.io/shard-durations``, rendered from a table in the
DAG file by a macro of the map index): each pod runs the shards its index packs, whatever packs the operator
chose, so every try and both systems run the same lengths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks
from airflow_kueue_provider.kueue.index_set import IndexSet

from .workload import Night, packed

PRIORITIES = {"align": 100, "call": 200, "gather": 300, "risk": 500}  # WorkloadPriorityClass values
PATH_FIRST = {"align": 300, "call": 200, "gather": 100, "risk": 500}
"""The longest remaining path first: a sample's first step before any sample's later steps. Its last samples
do not start late, so the night does not end on their steps one after another (issue 37's tail)."""
STEP_ORDERS = {"sample-first": PRIORITIES, "path-first": PATH_FIRST}
IMAGE = "example.invalid/night-shard:1"


@dataclass(frozen=True)
class NightQueues:
    genomics_namespace: str
    genomics_queue: str
    risk_namespace: str
    risk_queue: str
    priority_prefix: str  # WorkloadPriorityClass names: <prefix>-<step>
    checkpoint_container: str  # ours only

    def priority(self, step: str) -> str:
        return f"{self.priority_prefix}-{step}"


GENOMICS_DAG_ID = "night_genomics"
RISK_DAG_ID = "night_risk"

_HEADER = """
import json
from datetime import datetime, timedelta
from airflow.sdk import DAG, task_group

DURATIONS = json.loads({durations!r})  # step -> sample -> shard -> fake seconds


def night_shard_durations(step, sample):
    return ",".join(str(seconds) for seconds in DURATIONS[step][int(sample)])


def fake_lengths(step):
    # seconds by shard id: a fake pod runs the shards its index packs, one after another (docs/bed.md)
    macro = "{{{{ night_shard_durations('%s', ti.map_index) }}}}" % step
    return {{"kwok.airflow-kueue.io/shard-durations": macro}}


DEFAULTS = {{"retries": 2, "retry_delay": timedelta(seconds=5)}}
"""

_OURS_STEP = """
        {name} = KueueIndexedJobOperator(
            task_id={name!r}, namespace={namespace!r}, queue_name={queue!r}, priority_class={priority!r},
            image={image!r}, cmds=["python", "-m", "genomics.{name}"],
            arguments=["--sample", "{{{{ ti.map_index }}}}"],
            completions={shards}, parallelism={parallelism}, spot=True, backoff_limit_per_index={per_index},
            resources={{"requests": {{"cpu": "1", "memory": "1Gi"}}}},
            annotations=fake_lengths({name!r}),
            checkpointing=CHECKPOINTS,{deadline}{min_parallelism}{packing}
        )"""

_CNCF_STEP = """
        {name} = KubernetesStartKueueJobOperator(
            task_id={name!r}, namespace={namespace!r}, queue_name={queue!r},
            labels={{"kueue.x-k8s.io/priority-class": {priority!r}}},
            image={image!r}, cmds=["python", "-m", "genomics.{name}"],
            arguments=["--sample", "{{{{ ti.map_index }}}}"],
            completions={shards}, parallelism={parallelism}, completion_mode="Indexed",
            backoff_limit={backoff},
            container_resources=k8s.V1ResourceRequirements(requests={{"cpu": "1", "memory": "1Gi"}}),
            annotations={{**fake_lengths({name!r}), **{partial!r}}},
            deferrable=True, wait_until_job_complete=True,
            get_logs=False, do_xcom_push=False, discover_pods_retry_number={discover},
            pool={pool!r}, pool_slots={parallelism},
        )"""


def genomics_dag(night: Night, queues: NightQueues, system: str, *, discover_pods_retry_number: int) -> str:
    """The genomics DAG file of ``system`` ("ours" or "cncf")."""
    durations = json.dumps(night.genomics, separators=(",", ":"))
    steps = []
    for step in night.shape.steps:
        fields = {
            "name": step.name,
            "namespace": queues.genomics_namespace,
            "queue": queues.genomics_queue,
            "priority": queues.priority(step.name),
            "image": IMAGE,
            "shards": step.shards,
            "parallelism": night.shape.parallelism_of(step),
        }
        low = night.shape.min_parallelism_of(step)
        if system == "ours":
            last = step is night.shape.steps[-1]
            deadline = f" deadline={night.deadline_seconds()}," if last else ""
            partial = f" min_parallelism={low}," if low else ""
            stated = night.shape.stated_seconds_of(step)
            packing = f" expected_shard_duration={stated!r}," if stated is not None else ""
            steps.append(
                _OURS_STEP.format(
                    **fields,
                    deadline=deadline,
                    min_parallelism=partial,
                    packing=packing,
                    per_index=None if night.shape.whole_job_backoff else 4,
                )
            )
        else:
            steps.append(
                _CNCF_STEP.format(
                    **fields,
                    backoff=step.shards * 4,
                    discover=discover_pods_retry_number,
                    pool=genomics_pool(),
                    # the same Kueue feature, as a cncf user sets it: the annotation on the Job
                    partial={"kueue.x-k8s.io/job-min-parallelism": str(low)} if low else {},
                )
            )
    chain = " >> ".join(s.name for s in night.shape.steps)
    return (
        _HEADER.format(durations=durations)
        + _imports(system, queues)
        + f"""

with DAG({GENOMICS_DAG_ID!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         max_active_tasks=1024, default_args=DEFAULTS,
         user_defined_macros={{"night_shard_durations": night_shard_durations}},
         tags=["night", {system!r}]):

    @task_group
    def sample(sample_id):
{"".join(steps)}
        {chain}

    sample.expand(sample_id=list(range({night.shape.samples})))
"""
    )


def risk_dag(night: Night, queues: NightQueues, system: str, *, discover_pods_retry_number: int) -> str:
    """The risk team's DAG file: one task of ``risk_shards`` equal shards at ``risk_parallelism``."""
    shape = night.shape
    length = f"{night.risk[0]}s"
    if system == "ours":
        per_pod = shape.risk_shards_per_pod()
        packs = packed(night.risk, ShardPacks(IndexSet.range(0, len(night.risk)), per_pod))
        fake = {"kwok.airflow-kueue.io/run-duration": f"{packs[0]}s"}
        if packs[-1] != packs[0]:  # a shorter last pack
            fake[f"kwok.airflow-kueue.io/run-duration-{len(packs) - 1}"] = f"{packs[-1]}s"
        packing = f" shards_per_pod={per_pod}," if per_pod > 1 else ""
        task = f"""
    KueueIndexedJobOperator(
        task_id="pfe", namespace={queues.risk_namespace!r}, queue_name={queues.risk_queue!r},
        priority_class={queues.priority("risk")!r}, image={IMAGE!r}, cmds=["python", "-m", "risk.pfe"],
        completions={shape.risk_shards}, parallelism={shape.risk_parallelism}, backoff_limit_per_index=4,
        resources={{"requests": {{"cpu": "1", "memory": "1Gi"}}}},
        annotations={fake!r}, checkpointing=CHECKPOINTS,{packing}
    )"""
    else:
        task = f"""
    KubernetesStartKueueJobOperator(
        task_id="pfe", namespace={queues.risk_namespace!r}, queue_name={queues.risk_queue!r},
        labels={{"kueue.x-k8s.io/priority-class": {queues.priority("risk")!r}}}, image={IMAGE!r},
        cmds=["python", "-m", "risk.pfe"], completions={shape.risk_shards},
        parallelism={shape.risk_parallelism},
        completion_mode="Indexed", backoff_limit={shape.risk_shards},
        container_resources=k8s.V1ResourceRequirements(requests={{"cpu": "1", "memory": "1Gi"}}),
        annotations={{"kwok.airflow-kueue.io/run-duration": {length!r}}}, deferrable=True,
        wait_until_job_complete=True, get_logs=False, do_xcom_push=False,
        discover_pods_retry_number={discover_pods_retry_number}, pool={risk_pool()!r},
        pool_slots={shape.risk_parallelism},
    )"""
    return (
        _HEADER.format(durations="{}")
        + _imports(system, queues)
        + f"""

with DAG({RISK_DAG_ID!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args=DEFAULTS, tags=["night", {system!r}]):
{task}
"""
    )


def _imports(system: str, queues: NightQueues) -> str:
    if system == "ours":
        return f"""
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

CHECKPOINTS = Checkpointing(conn_id="kueue_blob_default", container={queues.checkpoint_container!r})
"""
    if system == "cncf":
        return """
from kubernetes.client import models as k8s
from airflow.providers.cncf.kubernetes.operators.kueue import KubernetesStartKueueJobOperator
"""
    raise ValueError(f"system={system!r}: give 'ours' or 'cncf'")


def genomics_pool() -> str:
    return "night_genomics"


def risk_pool() -> str:
    return "night_risk"
