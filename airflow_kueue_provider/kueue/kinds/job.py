"""The Job kind (``batch/v1``): an Indexed Job, the kind every other kind's pods run in."""

from __future__ import annotations

from .description import ApiCoordinates, ConditionEnd, KindDescription
from .registry import register

JOB = register(
    KindDescription(
        kind="Job",
        api=ApiCoordinates("batch", "v1", "jobs"),
        key_prefix="job",
        end=ConditionEnd(success="Complete"),
        hosts_children=True,
        operator_names=("KueueIndexedJobOperator", "KueueDecoratedOperator"),  # @task.kueue too
        always_watched=True,
    )
)
