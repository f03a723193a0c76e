"""The soak's DAGs, modelled on the two examples and scaled to the bed (rendered with the soak's queues).

- ``soak_genomics`` (example_dags/genomics_nightly.py): ``align_chromosome_shards`` runs the real aligner
  program on the process nodes, with Blob checkpointing; ``publish`` reads its result.
- ``soak_monte_carlo`` (example_dags/monte_carlo_fair_share.py): a low-priority ``research_batch`` that
  borrows and a high-priority ``risk_var_run`` that reclaims, both fake shards on the soak's KWOK Spot
  nodes (two ClusterQueues in one cohort); with process nodes also ``price_strip``, the real Monte Carlo
  pricer; ``report`` reads every result.

Every Kueue task has retries: a fault at submit time (Kueue's webhook down, Azurite down) fails a try, and the
next try must end the task right; the checker expects every task to succeed.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

RETRIES = 10
PROCESS_CPU = "250m"  # per process shard: 8 fit the process ClusterQueue's 2 CPU


@dataclass(frozen=True)
class ShardProgram:
    """A real shard program run by a task: its module, its arguments (less the items log) and shards."""

    module: str
    dag_id: str
    task_id: str
    shards: int
    args: tuple[str, ...]

    @property
    def items(self) -> int:
        return int(self.args[self.args.index("--items") + 1])

    def argv(self, items_log: str) -> list[str]:
        return [*self.args, "--items-log", items_log]

    def expected_outputs(self) -> dict[str, dict[str, Any]]:
        """``<dag>/<task>/<shard>`` -> what its done marker must hold (the program's own fold)."""
        import importlib

        from example_dags.shard_programs.shard_loop import expected_output

        program = importlib.import_module(f"example_dags.shard_programs.{self.module}")
        args: argparse.Namespace = program.parser().parse_args(self.argv("-"))
        work = program.make_work(args)
        return {
            f"{self.dag_id}/{self.task_id}/{shard}": expected_output(program.PROGRAM, work, shard, self.items)
            for shard in range(self.shards)
        }


ALIGNER = ShardProgram(
    "aligner",
    "soak_genomics",
    "align_chromosome_shards",
    4,
    ("--items", "24", "--checkpoint-every", "4", "--item-seconds", "0.5", "--reads-per-item", "2",
     "--input-pattern", "chromosome_{shard}.bam"),
)  # fmt: skip
PRICER = ShardProgram(
    "monte_carlo_pricer",
    "soak_monte_carlo",
    "price_strip",
    3,
    ("--items", "20", "--checkpoint-every", "5", "--item-seconds", "0.5", "--paths", "16", "--steps", "16"),
)

HEADER = """
from datetime import datetime, timedelta
from airflow.sdk import DAG, task
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

DEFAULTS = {{"retries": {retries}, "retry_delay": timedelta(seconds=5)}}
# The shards' done markers (their outputs) stay for the soak's checker: kept after success.
CHECKPOINTS = Checkpointing(conn_id="kueue_blob_default", container={container!r}, keep_after_success=True)


def process_task(task_id, namespace, queue, module, arguments, shards):
    return KueueIndexedJobOperator(
        task_id=task_id, namespace=namespace, queue_name=queue, image="example.invalid/shard:1",
        cmds=["python", "-m", "example_dags.shard_programs." + module], arguments=arguments,
        completions=shards, parallelism=shards, spot=True, backoff_limit_per_index=4,
        resources={{"requests": {{"cpu": {cpu!r}, "memory": "256Mi"}}}}, checkpointing=CHECKPOINTS,
    )
"""

GENOMICS = """
with DAG("soak_genomics", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         max_active_runs=3, default_args=DEFAULTS):
    align = process_task("align_chromosome_shards", {namespace!r}, {queue!r}, "aligner", {argv!r}, {shards})

    @task
    def publish(result):
        return {{"aligned": result["completed_indexes"], "failed": result["failed_indexes"]}}

    publish(align.output)
"""

MONTE_CARLO = """
def fake_task(task_id, queue, priority, shards, seconds):
    return KueueIndexedJobOperator(
        task_id=task_id, namespace={namespace!r}, queue_name=queue, priority_class=priority,
        image="example.invalid/monte-carlo:1", cmds=["python", "-m", "montecarlo.simulate"],
        arguments=["--seed", "$(JOB_COMPLETION_INDEX)"], completions=shards, parallelism=shards, spot=True,
        backoff_limit_per_index=2, resources={{"requests": {{"cpu": "1", "memory": "1Gi"}}}},
        annotations={{"kwok.airflow-kueue.io/run-duration": seconds}},
    )


with DAG("soak_monte_carlo", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         max_active_runs=3, default_args=DEFAULTS):
    results = [
        fake_task("research_batch", "research", {research_priority!r}, 6, "20s").output,
        fake_task("risk_var_run", "risk", {risk_priority!r}, 4, "10s").output,
    ]
    if {with_pricer!r}:
        price = process_task("price_strip", {namespace!r}, "proc", "monte_carlo_pricer", {argv!r}, {shards})
        results.append(price.output)

    @task
    def report(results):
        return [{{"succeeded": r["succeeded"], "evictions": r["evictions"]}} for r in results]

    report(results)
"""


@dataclass
class SoakDags:
    """The two DAG files for one soak's namespaces, queues and items logs."""

    genomics_namespace: str
    monte_carlo_namespace: str
    container: str
    items_dir: str
    research_priority: str
    risk_priority: str
    process_nodes: bool
    programs: list[ShardProgram] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.programs = [ALIGNER, PRICER] if self.process_nodes else []

    def items_log(self, program: ShardProgram) -> str:
        return f"{self.items_dir}/{program.dag_id}.{program.task_id}.log"

    def sources(self) -> dict[str, str]:
        header = HEADER.format(retries=RETRIES, container=self.container, cpu=PROCESS_CPU)
        files = {
            "soak_monte_carlo": header
            + MONTE_CARLO.format(
                namespace=self.monte_carlo_namespace,
                research_priority=self.research_priority,
                risk_priority=self.risk_priority,
                with_pricer=self.process_nodes,
                argv=PRICER.argv(self.items_log(PRICER)),
                shards=PRICER.shards,
            )
        }
        if self.process_nodes:
            files["soak_genomics"] = header + GENOMICS.format(
                namespace=self.genomics_namespace,
                queue="lq",
                argv=ALIGNER.argv(self.items_log(ALIGNER)),
                shards=ALIGNER.shards,
            )
        return files

    def expected_states(self) -> dict[str, str]:
        tasks = [
            "soak_monte_carlo/research_batch",
            "soak_monte_carlo/risk_var_run",
            "soak_monte_carlo/report",
        ]
        if self.process_nodes:
            tasks += ["soak_monte_carlo/price_strip", "soak_genomics/align_chromosome_shards"]
            tasks += ["soak_genomics/publish"]
        return dict.fromkeys(tasks, "success")

    def items_per_shard(self) -> dict[str, int]:
        return {f"{p.dag_id}/{p.task_id}": p.items for p in self.programs}

    def expected_outputs(self) -> dict[str, dict[str, Any]]:
        outputs: dict[str, dict[str, Any]] = {}
        for program in self.programs:
            outputs.update(program.expected_outputs())
        return outputs
