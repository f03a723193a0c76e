"""How a sharded Job retries (pure): per index by default, and never for exit codes the user calls final.

Kubernetes' default for a Job is one ``backoffLimit`` of 6 for the whole Job: 7 pod failures anywhere fail
all 1,000 shards, and a retried pod may redo a shard that had already written its output. For independent
shards the provider asks for a per-index limit instead (``backoffLimitPerIndex``, default 1 retry): an index
that fails twice fails alone, the others go on, and Kubernetes then sets no whole-Job limit (its
``backoffLimit`` defaults to the maximum). The task fails only by ``max_failed_indexes`` (or at the end, when
any index failed). Exit codes listed in ``non_retriable_exit_codes`` (a bad input, a checksum that cannot
match) end their index at once through a ``podFailurePolicy`` rule with ``action: FailIndex``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_BACKOFF_LIMIT_PER_INDEX = 1
"""Retries of one index before it counts as failed: one retry covers a lost node or a flaky pull."""
MAX_EXIT_CODE_VALUES = 255  # Kubernetes' limit on onExitCodes.values


class PerIndexDefault:
    """``backoff_limit_per_index`` left out: ``None`` already means Kubernetes' whole-Job limit, so "not
    given" needs a value of its own (1 retry per index, or what the ``job_template`` sets)."""

    def __repr__(self) -> str:
        return "PER_INDEX_DEFAULT"


PER_INDEX_DEFAULT = PerIndexDefault()


def per_index_retries(given: int | PerIndexDefault | None, template_spec: Mapping[str, Any]) -> int | None:
    """The ``backoffLimitPerIndex`` to build: what the user gave (``None`` = Kubernetes' whole-Job
    ``backoffLimit``), else what a ``job_template`` sets (per index, or a whole-Job limit: kept), else the
    default."""
    if not isinstance(given, PerIndexDefault):
        return given
    if "backoffLimitPerIndex" in template_spec:
        return int(template_spec["backoffLimitPerIndex"])
    if "backoffLimit" in template_spec:
        return None
    return DEFAULT_BACKOFF_LIMIT_PER_INDEX


def fail_index_rule(exit_codes: Sequence[int]) -> dict[str, Any]:
    """The podFailurePolicy rule that fails an index at once when its pod exits with one of ``exit_codes``."""
    return {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": sorted(set(exit_codes))}}


def exit_code_problems(exit_codes: object, backoff_limit_per_index: int | None) -> list[str]:
    """What is wrong with ``non_retriable_exit_codes`` (empty: nothing)."""
    if exit_codes is None:
        return []
    if isinstance(exit_codes, (str, bytes)) or not isinstance(exit_codes, Sequence):
        return [f"got {exit_codes!r}: set a list of exit codes, e.g. [2, 3]"]
    bad = [c for c in exit_codes if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= 255]
    problems = []
    if bad:
        problems.append(f"{bad!r}: exit codes are integers from 1 to 255 (0 is success)")
    if not exit_codes or len(set(exit_codes)) > MAX_EXIT_CODE_VALUES:
        problems.append(f"give 1 to {MAX_EXIT_CODE_VALUES} exit codes")
    if backoff_limit_per_index is None:
        problems.append(
            "needs per-index retries (Kubernetes' FailIndex action): leave backoff_limit_per_index at its "
            "default or set it"
        )
    return problems
