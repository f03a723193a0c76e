"""The base of the errors the provider raises on purpose (pure).

Every typed error of the provider and the worker SDK is a ``KueueProviderError`` as well as what it is to
its callers (a ``ValueError`` for bad input, an ``AirflowFailException`` for a task that must not retry, a
``RuntimeError`` for the cluster saying no): ``except KueueProviderError`` catches the provider's own and
nothing of Airflow's, Kubernetes' or Azure's. Not included: ``ShardsFailed`` and ``ShardAlreadyDone``, the
SDK's ways out of the process (``SystemExit``, which ``except Exception`` must not catch), and the private
control-flow exceptions.
"""

from __future__ import annotations


class KueueProviderError(Exception):
    """An error the provider raises on purpose; its message says what happened and what to change."""
