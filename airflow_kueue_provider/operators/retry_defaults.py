"""The "not given" marker of ``backoff_limit_per_index``: ``None`` means Kubernetes' whole-Job limit, so
the default (per-index retries, see ``kueue.retry_policy``) needs a value of its own."""

from __future__ import annotations


class PerIndexDefault:
    """``backoff_limit_per_index`` left out: 1 retry per index, or what the ``job_template`` sets."""

    def __repr__(self) -> str:
        return "PER_INDEX_DEFAULT"


PER_INDEX_DEFAULT = PerIndexDefault()
