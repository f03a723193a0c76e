"""The soak's Airflow deployment: as ``airflow_deployment``'s (PostgreSQL, API server, scheduler, DAG
processor, ``TRIGGERERS`` triggerers, ``AIRFLOW_CONFIG``), plus the Blob connection the checkpointing tasks
use; a failing test's report ends with every component's log tail (the same hook)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ..airflow_deployment.conftest import (  # noqa: F401
    module_deployment,
    postgres_server,
    pytest_runtest_makereport,
)
from ..deployment import AirflowDeployment, Postgres


@pytest.fixture(scope="module")
def deployment(
    request: pytest.FixtureRequest,
    postgres_server: Postgres,  # noqa: F811
    devcluster_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AirflowDeployment]:
    connection = {
        "conn_type": "wasb",
        "extra": {"connection_string": devcluster_env["AZURE_STORAGE_CONNECTION_STRING"]},
    }
    env = {"AIRFLOW_CONN_KUEUE_BLOB_DEFAULT": json.dumps(connection)}
    yield from module_deployment(request, postgres_server, devcluster_env, tmp_path_factory, env)
