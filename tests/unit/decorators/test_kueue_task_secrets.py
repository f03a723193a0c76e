"""@task.kueue refuses an argument whose rendered value is a secret Airflow's masker knows: the arguments
travel in the Job's pod environment, readable by anyone who can read Jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from airflow.sdk import DAG

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.decorators.kueue_task import KueueDecoratedOperator, kueue_task
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity

QUEUE: dict[str, Any] = {"queue_name": "lq", "namespace": "risk", "image": "risk-shard:1", "completions": 4}
SECRET = "kueue-unit-secret-7f3a9c"


@pytest.fixture(autouse=True)
def masked() -> None:
    """As Airflow does when a task reads a connection (``{{ conn.x.password }}``) or a sensitive Variable."""
    from airflow.sdk.log import mask_secret

    mask_secret(SECRET)


def _operator(*args: Any, **kwargs: Any) -> KueueDecoratedOperator:
    with DAG("kueue_task_secrets", schedule=None, start_date=datetime(2026, 1, 1)):

        @kueue_task(checkpointing="kueue_blob_default", **QUEUE)
        def load(shard: Any, dsn: Any, options: Any = None) -> int:
            return 1

        return load(*args, **kwargs).operator  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize(
    ("args", "kwargs", "name"),
    [
        ((), {"dsn": SECRET}, "dsn"),
        ((f"postgresql://app:{SECRET}@db/app",), {}, "dsn"),
        (("db",), {"options": {"auth": {"password": SECRET}}}, "options"),
    ],
    ids=["keyword", "positional-inside-a-string", "nested"],
)
def test_an_argument_holding_a_masked_secret_is_refused_naming_it_before_any_job(
    args: tuple[Any, ...], kwargs: dict[str, Any], name: str
) -> None:
    op = _operator(*args, **kwargs)
    with pytest.raises(AirflowFailException) as refused:
        op.build_manifest(AirflowIdentity("kueue_task_secrets", "load", "run-1"))
    message = str(refused.value)
    assert f"argument {name!r} holds a secret" in message
    assert "Kubernetes Secret" in message and "read the connection inside the pod" in message
    assert SECRET not in message


def test_arguments_without_a_known_secret_reach_the_pods() -> None:
    op = _operator("postgresql://app@db/app", options={"password_file": "/var/run/secrets/db"})
    names = {e["name"] for e in op._payload_env()}
    assert "AIRFLOW_KUEUE_TASK_CALL" in names


def test_the_redactor_is_airflows_public_one() -> None:
    from airflow_kueue_provider.decorators.kueue_task import _redactor

    assert _redactor()(SECRET) != SECRET and _redactor()("plain") == "plain"
