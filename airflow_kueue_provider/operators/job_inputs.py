"""The Job kind's own inputs, parsed when the DAG is parsed (``KueueIndexedJobOperator.__init__``).

Pod-spec inputs come as KubernetesPodOperator users pass them; the manifest reads one form: an alias
resolved (``env_vars``, ``container_resources``: set one of a pair), Kubernetes client models as the API's
dicts, the cncf provider's ``Secret``\\ s merged into env, env_from, volumes and mounts. A bad value fails the
DAG's import naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..airflow_compat import AirflowFailException
from ..kueue.checkpoints.packing_choice import ShardDuration, ShardDurationParam
from ..kueue.checkpoints.shard_packing import InvalidPacking
from ..kueue.spec.topology import InvalidTopology, TopologyRequest
from .k8s_models import from_secrets, plain
from .template_file import env_items, joined


@dataclass(frozen=True)
class PodInputs:
    """The pod-spec inputs that are more than kept: ``job_resources`` is ``resources`` (BaseOperator's
    ``resources`` means executor resources)."""

    env: Any
    job_resources: Any
    volumes: Any
    volume_mounts: Any
    env_from: Any

    @classmethod
    def parse(
        cls,
        task_id: str,
        *,
        env: Any,
        env_vars: Any,
        resources: Any,
        container_resources: Any,
        secrets: Sequence[Any] | None,
        volumes: Any,
        volume_mounts: Any,
        env_from: Any,
    ) -> PodInputs:
        for name, value, alias, other in (
            ("env", env, "env_vars", env_vars),
            ("resources", resources, "container_resources", container_resources),
        ):
            if value is not None and other is not None:
                raise AirflowFailException(f"{task_id}: set {name} or {alias} (the same thing), not both")
        secret_env, secret_env_from, secret_volumes, secret_mounts = from_secrets(secrets)
        merged_env = plain(env if env is not None else env_vars)
        if secret_env:
            merged_env = [*env_items(merged_env), *secret_env]
        return cls(
            env=merged_env,
            job_resources=plain(resources if resources is not None else container_resources),
            volumes=joined(plain(volumes), secret_volumes),
            volume_mounts=joined(plain(volume_mounts), secret_mounts),
            env_from=joined(plain(env_from), secret_env_from),
        )

    def keep_on(self, operator: object) -> None:
        """Each as the operator's attribute of the same name (what its manifest and templating read)."""
        for field in fields(self):
            setattr(operator, field.name, getattr(self, field.name))


def topology_param(
    task_id: str, value: TopologyRequest | str | dict[str, Any] | None
) -> TopologyRequest | None:
    """``topology=`` as a ``TopologyRequest`` (a label key, ``{"preferred": key}`` or the request itself)."""
    try:
        return TopologyRequest.from_param(value)
    except InvalidTopology as exc:
        raise AirflowFailException(f"{task_id}: {exc}") from None


def shard_duration_param(task_id: str, value: ShardDurationParam) -> ShardDuration | None:
    """``expected_shard_duration=`` as a ``ShardDuration`` (seconds, a ``timedelta``, or a range of them)."""
    try:
        return ShardDuration.from_param(value)
    except InvalidPacking as exc:
        raise AirflowFailException(f"{task_id}: {exc}") from None
