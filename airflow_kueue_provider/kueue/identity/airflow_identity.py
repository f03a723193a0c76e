"""The Airflow task instance a Job belongs to: its ``airflow-kueue.io/*`` labels and a deterministic name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_kueue_provider.kueue.k8s_names import (
    HASH_LENGTH,
    MAX_JOB_NAME_LENGTH,
    dns_fragment,
    safe_label_value,
)

from ..names import DAG_ID_LABEL, MAP_INDEX_LABEL, RUN_ID_LABEL, TASK_ID_LABEL, TRY_NUMBER_LABEL


class NameHasher(Protocol):
    """What keys a name's hash part (``identity_seal.IdentitySeal``; a protocol so the seal, which reads
    identities, and this module do not import each other)."""

    def name_hash(self, *parts: str) -> str: ...


@dataclass(frozen=True)
class AirflowIdentity:
    """The Airflow task instance a Job belongs to; becomes labels (hashed when needed) and annotations."""

    dag_id: str
    task_id: str
    run_id: str
    try_number: int = 1
    map_index: int = -1
    """-1 for an unmapped task, as in Airflow."""

    def labels(self) -> dict[str, str]:
        labels = {
            DAG_ID_LABEL: safe_label_value(self.dag_id),
            TASK_ID_LABEL: safe_label_value(self.task_id),
            RUN_ID_LABEL: safe_label_value(self.run_id),
            TRY_NUMBER_LABEL: str(self.try_number),
        }
        if self.map_index >= 0:
            labels[MAP_INDEX_LABEL] = str(self.map_index)
        return labels

    def task_instance_selector(self) -> str:
        """The label selector of the task instance's objects, any try (a server-side pre-selection: labels
        are hashed and can collide, the annotations decide)."""
        labels = self.labels()
        return ",".join(f"{k}={labels[k]}" for k in sorted((DAG_ID_LABEL, RUN_ID_LABEL, TASK_ID_LABEL)))

    def annotations(self) -> dict[str, str]:
        """The full, unhashed values."""
        return {
            DAG_ID_LABEL: self.dag_id,
            TASK_ID_LABEL: self.task_id,
            RUN_ID_LABEL: self.run_id,
            TRY_NUMBER_LABEL: str(self.try_number),
            MAP_INDEX_LABEL: str(self.map_index),
        }


def identity_of(obj: Mapping[str, Any]) -> AirflowIdentity | None:
    """The identity an object's annotations claim (full values, its own try); None when one is missing."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    values = [annotations.get(k) for k in (DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL)]
    try:
        try_number = int(annotations.get(TRY_NUMBER_LABEL))  # type: ignore[arg-type]
        map_index = int(annotations.get(MAP_INDEX_LABEL, "-1"))
    except (TypeError, ValueError):
        return None
    if not all(isinstance(v, str) for v in values):
        return None
    dag_id, task_id, run_id = (str(v) for v in values)
    return AirflowIdentity(dag_id, task_id, run_id, try_number=try_number, map_index=map_index)


def deterministic_job_name(
    identity: AirflowIdentity,
    prefix: str | None = None,
    *,
    seal: NameHasher,
    per_try: bool = False,
    variant: str = "",
    max_length: int = MAX_JOB_NAME_LENGTH,
) -> str:
    """A Job name for ``identity``: the same inputs always give the same name (so a retry can reattach).

    It differs per (dag_id, task_id, run_id, map_index), per try_number only when ``per_try``, and per
    ``variant`` (a second Job of the same try, e.g. a deadline spill) when one is given. The result
    is a DNS-1123 label of at most ``max_length`` (52) characters: a readable part (``prefix``, or
    ``<dag>-<task>[-<map>]``, lower-cased and truncated) + ``-`` + 10 hex of an HMAC over the identity
    under ``seal``'s key: only Airflow can compute it, so no tenant can create the name ahead of the task.
    """
    parts = [identity.dag_id, identity.task_id, identity.run_id, str(identity.map_index)]
    if per_try:
        parts.append(str(identity.try_number))
    if variant:
        parts.append(variant)
    digest = seal.name_hash(*parts)
    if prefix is None:
        readable = f"{identity.dag_id}-{identity.task_id}"
        if identity.map_index >= 0:
            readable += f"-{identity.map_index}"
    else:
        readable = prefix
    readable = dns_fragment(readable)[: max(max_length - HASH_LENGTH - 1, 0)].rstrip("-")
    return f"{readable}-{digest}" if readable else f"job-{digest}"
