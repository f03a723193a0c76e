"""A real Airflow deployment per test module: PostgreSQL, API server, scheduler (LocalExecutor), DAG
processor and ``TRIGGERERS`` triggerers (a module-level constant, default 1), with ``AIRFLOW_CONFIG``
(``section.option`` keys) on top of the bed's settings. Every process is stopped at the end of the
module; the logs stay in the AIRFLOW_HOME (pytest's temp dir), and a failing test's report ends with the
tail of each component's log. DEPLOYMENT_ASYNCIO_DEBUG=1 runs the triggerers in asyncio's debug mode, so
their logs name each event-loop step that took over 0.1 s."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from ..cluster import short_id
from ..deployment import TEMPLATE_DB, AirflowDeployment, Postgres, started_postgres


@pytest.fixture(scope="session")
def postgres_server(devcluster_env: dict[str, str]) -> Iterator[Postgres]:
    """One PostgreSQL server per test process, its data a copy of the migrated template."""
    server = started_postgres(devcluster_env)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deployment(
    request: pytest.FixtureRequest,
    postgres_server: Postgres,
    devcluster_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AirflowDeployment]:
    yield from module_deployment(request, postgres_server, devcluster_env, tmp_path_factory)


def module_deployment(
    request: pytest.FixtureRequest,
    postgres_server: Postgres,
    devcluster_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
    env: dict[str, str] | None = None,
) -> Iterator[AirflowDeployment]:
    """The ``deployment`` fixture's body, for a package whose deployment needs ``env`` on top (e.g. a
    connection)."""
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
    bed.env.update(env or {})
    if os.environ.get("DEPLOYMENT_ASYNCIO_DEBUG"):  # the triggerers' logs then name every step over 0.1 s
        bed.component_env["triggerer"] = {"PYTHONASYNCIODEBUG": "1"}
    try:
        bed.start(triggerers=getattr(module, "TRIGGERERS", 1))
        yield bed
    except BaseException:
        print(bed.log_tails())
        raise
    finally:
        bed.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    """A failing test's report ends with the tail of every component's log (the files stay in place)."""
    outcome = yield
    report = outcome.get_result()
    bed = getattr(item, "funcargs", {}).get("deployment")
    if report.failed and isinstance(bed, AirflowDeployment):
        report.sections.append(("Airflow deployment logs (tails)", bed.log_tails(80)))
