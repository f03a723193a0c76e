"""Moved to :mod:`airflow_kueue_provider.operators.finished_job_sweep` (kept so existing DAGs import)."""

from .finished_job_sweep import KueueFinishedJobSweepOperator

__all__ = ["KueueFinishedJobSweepOperator"]
