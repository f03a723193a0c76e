"""Moved to :mod:`airflow_kueue_provider.operators.checkpoint_sweep` (kept so existing DAGs import)."""

from .checkpoint_sweep import KueueCheckpointSweepOperator

__all__ = ["KueueCheckpointSweepOperator"]
