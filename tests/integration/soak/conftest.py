"""The soak's Airflow deployment: as ``airflow_deployment``'s (PostgreSQL, API server, scheduler, DAG
processor, ``TRIGGERERS`` triggerers, ``AIRFLOW_CONFIG``), plus the Blob connection the checkpointing tasks
use; a failing test's report ends with every component's log tail (the same hook)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from ..airflow_deployment.conftest import postgres_server, pytest_runtest_makereport  # noqa: F401
from ..cluster import short_id
from ..deployment import TEMPLATE_DB, AirflowDeployment, Postgres


@pytest.fixture(scope="module")
def deployment(
    request: pytest.FixtureRequest,
    postgres_server: Postgres,  # noqa: F811
    devcluster_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AirflowDeployment]:
    module = request.module
    name = re.sub(r"[^a-z0-9]+", "_", module.__name__.rsplit(".", 1)[-1].lower())
    database = f"{name}_{short_id()}"
    postgres_server.create_database(database, template=TEMPLATE_DB)
    bed = AirflowDeployment.create(
        tmp_path_factory.mktemp(f"airflow-{name}"),
        postgres_server,
        database,
        devcluster_env,
        config=getattr(module, "AIRFLOW_CONFIG", None),
    )
    connection = {
        "conn_type": "wasb",
        "extra": {"connection_string": devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]},
    }
    bed.env["AIRFLOW_CONN_KUEUE_BLOB_DEFAULT"] = json.dumps(connection)
    try:
        bed.start(triggerers=getattr(module, "TRIGGERERS", 1))
        yield bed
    except BaseException:
        print(bed.log_tails())
        raise
    finally:
        bed.stop()
