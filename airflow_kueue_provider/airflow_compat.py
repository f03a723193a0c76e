"""The few Airflow names whose home moved between the Airflow versions this provider supports (3.1+).

Airflow 3.2's task SDK re-exports the task exceptions (``airflow.sdk.exceptions``) and the configuration
(``airflow.sdk.configuration``); 3.1 has them only in ``airflow.exceptions`` and ``airflow.configuration``.
Both paths name the same objects where both exist.
"""

from __future__ import annotations

from typing import Any

try:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 3.1
    from airflow.exceptions import AirflowException, AirflowFailException  # type: ignore[attr-defined,no-redef]

from airflow.sdk.bases.hook import BaseHook  # the hooks' base on every supported Airflow (3.1+)

__all__ = ["AirflowException", "AirflowFailException", "BaseHook", "stats", "task_conf"]


def task_conf() -> Any:
    """Airflow's configuration as a task reads it (the task SDK's from 3.2 on)."""
    try:
        from airflow.sdk.configuration import conf
    except ImportError:  # Airflow 3.1
        from airflow.configuration import conf
    return conf


def stats() -> Any:
    """Airflow's ``Stats`` (StatsD or OpenTelemetry, as ``[metrics]`` configures it)."""
    try:
        from airflow.sdk.observability.stats import Stats
    except ImportError:  # Airflow 3.1
        from airflow.stats import Stats
    return Stats
