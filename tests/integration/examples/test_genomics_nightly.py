"""The nightly genomics example imports cleanly and runs end to end, scaled down, on the local cluster."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, short_id
from ..operators.test_indexed_job_queueing import returned_result

EXAMPLES = Path(__file__).resolve().parents[3] / "example_dags"


def test_example_dags_have_no_import_errors(airflow_home: AirflowHome) -> None:
    run = airflow_home.airflow(
        "dags",
        "list-import-errors",
        "--output",
        "json",
        extra_env={"AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLES)},
    )
    assert json.loads(run.output.strip().splitlines()[-1] or "[]") == [], run.output


def test_genomics_nightly_runs_scaled_down(
    kueue_env: KueueEnv, airflow_home: AirflowHome, devcluster_env: dict[str, str]
) -> None:
    conn_string = devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]
    shutil.copy(EXAMPLES / "genomics_nightly.py", airflow_home.home / "dags" / "genomics_nightly.py")
    airflow_home.env.update(
        {
            "AIRFLOW_CONN_KUEUE_BLOB_DEFAULT": json.dumps(
                {"conn_type": "wasb", "extra": {"connection_string": conn_string}}
            ),
            "GENOMICS_SHARDS": "30",
            "GENOMICS_PARALLELISM": "10",
            "GENOMICS_RUN_DURATION": "2s",
            "GENOMICS_NAMESPACE": kueue_env.namespace,
            "GENOMICS_QUEUE": kueue_env.local_queue,
            "GENOMICS_BLOB_CONTAINER": f"genomics-{short_id()}",
        }
    )

    run = airflow_home.test_dag("genomics_nightly")

    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    assert result["completed_indexes"] == "0-29" and result["failed"] == 0
    assert "30/30 chromosome shards aligned (0-29); failed: none" in run.output
    assert result["estimated_cost_usd"] > 0 and "Spot" in result["cost_basis"]
    job = kueue_env.job(result["job_name"])
    assert job is not None
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "chromosome_{shard}.bam" in args
