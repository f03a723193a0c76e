"""`make demo`: the nightly genomics example end to end on the local cluster, then a short summary.

Steps: 1. start (or reuse) the local cluster and Azurite; 2. apply the example's Kueue queues; 3. prepare an
Airflow home under .demo/ (SQLite); 4. run `airflow dags test genomics_nightly` with the shard count scaled
down (DEMO_SHARDS, default 40 instead of 1,000); 5. print what happened and how to open the Airflow UI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from devcluster.cluster import Kubectl, build_binaries  # noqa: E402
from devcluster.layout import Layout  # noqa: E402

DEMO = REPO / ".demo"
SHARDS = int(os.environ.get("DEMO_SHARDS", "40"))
PARALLELISM = int(os.environ.get("DEMO_PARALLELISM", "10"))


def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def cluster_env() -> dict[str, str]:
    return Layout.default().exported_env()


def apply_queues(env: dict[str, str]) -> None:
    kubectl = Kubectl(build_binaries(), Layout.default())
    kubectl("apply", "--server-side", "-f", str(REPO / "example_dags" / "manifests" / "genomics-queues.yaml"))


def airflow_env(env: dict[str, str]) -> dict[str, str]:
    home = DEMO / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    blob = {"conn_type": "wasb", "extra": {"connection_string": env["AZURE_STORAGE_CONNECTION_STRING"]}}
    return {
        **os.environ,
        **env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "example_dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_KUEUE_BLOB_DEFAULT": json.dumps(blob),
        "GENOMICS_SHARDS": str(SHARDS),
        "GENOMICS_PARALLELISM": str(PARALLELISM),
        "GENOMICS_RUN_DURATION": os.environ.get("DEMO_SHARD_SECONDS", "3s"),
        "GENOMICS_BLOB_CONTAINER": "genomics-checkpoints",
    }


UI_ENV = DEMO / "airflow.env"
"""Export lines of the demo's Airflow setup, so ``airflow standalone`` runs on the very same one."""


def write_ui_env(cluster: dict[str, str], aenv: dict[str, str]) -> None:
    keys = sorted(k for k in aenv if k in cluster or aenv[k] != os.environ.get(k))
    UI_ENV.write_text("".join(f"export {k}={shlex.quote(aenv[k])}\n" for k in keys))


def airflow(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), *args],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run_dag(env: dict[str, str]) -> tuple[str, float]:
    """Run the DAG; echo the provider's progress lines as they come; return the whole log and wall time."""
    log_path = DEMO / "genomics_nightly.log"
    started = time.monotonic()
    lines = []
    with subprocess.Popen(
        [str(Path(sys.executable).with_name("airflow")), "dags", "test", "genomics_nightly"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            shown = re.search(r"\] (genomics/\S+: .*|submitted Job .*|reattached to .*?) \[airflow", line)
            if shown:
                print("   ", shown.group(1), flush=True)
            elif "chromosome shards aligned" in line:
                print("   ", line.split("] ", 1)[-1].split(" [")[0].strip(), flush=True)
    log_path.write_text("".join(lines))
    if proc.returncode != 0:
        sys.exit(f"the DAG run failed; its log is {log_path}")
    return "".join(lines), time.monotonic() - started


def summary(log: str, wall: float) -> None:
    match = re.search(r"; result: (\{.*?\}) \[", log)
    if not match:
        sys.exit(f"no result in the log ({DEMO / 'genomics_nightly.log'})")
    result = json.loads(match.group(1))
    admitted = re.search(r": admitted to (\S+) \[([^\]]*)\]", log)
    flavor = f" [{admitted.group(2)}]" if admitted else ""  # no line when the first look found it running
    print(f"""
================ nightly genomics demo: summary ================
shards            {result["completions"]} (scaled down from 1,000 for the demo; DEMO_SHARDS to change)
queue wait        {result["queued_seconds"]} s in LocalQueue genomics/genomics-queue
admission         ClusterQueue {result["cluster_queue"]}{flavor}
indexes done      {result["succeeded"]} ({result["completed_indexes"]})
indexes failed    {result["failed"]} ({result["failed_indexes"] or "none"})
evictions         {result["evictions"]}
attempts          {result.get("attempts", 1)}
wall time         {wall:.0f} s for the whole DAG run (Airflow start-up included)
estimated cost    ${result.get("estimated_cost_usd")} ({result.get("cost_basis")})
Job               {result["namespace"]}/{result["job_name"]} (deleted by the TTL controller after a day)
ledger            Azurite container {result.get("ledger", "?")}
checkpoints       genomics-checkpoints/genomics_nightly/<run_id>/align_chromosome_shards/shards/
                  (the shards' checkpoints are deleted after success; the ledger stays)
task log          {DEMO / "genomics_nightly.log"}

Open the Airflow UI on the same setup (the API server and UI on http://localhost:8080; the admin
password is printed at start and kept in {DEMO / "airflow" / "simple_auth_manager_passwords.json.generated"}):
  source .venv/bin/activate && source {UI_ENV.relative_to(REPO)} && airflow standalone
then Browse -> Kueue queues (http://localhost:8080/kueue/queues), and the Kueue tab of a task instance
of align_chromosome_shards (its Jobs' index grid and admission timeline).
=================================================================""")


def main() -> None:
    step("1. local cluster (etcd, kube-apiserver, controller-manager, scheduler, KWOK, Kueue) and Azurite")
    subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, check=True)
    env = cluster_env()
    step(
        "2. the example's Kueue queues: ResourceFlavor spot-d16ds-v5, ClusterQueue genomics-cq, "
        "LocalQueue genomics-queue"
    )
    apply_queues(env)
    step(f"3. Airflow home in {DEMO / 'airflow'}")
    aenv = airflow_env(env)
    write_ui_env(env, aenv)
    airflow(aenv, "db", "migrate")
    airflow(aenv, "dags", "reserialize")
    step(
        f"4. airflow dags test genomics_nightly ({SHARDS} shards at parallelism {PARALLELISM} on fake "
        "Spot nodes)"
    )
    log, wall = run_dag(aenv)
    summary(log, wall)


if __name__ == "__main__":
    main()
