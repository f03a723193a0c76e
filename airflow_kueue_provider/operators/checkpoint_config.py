"""``Checkpointing``: the operator's ``checkpointing=`` (where shards checkpoint, how their pods reach it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..kueue.checkpoints.checkpoint_access import DEFAULT_CREDENTIAL_TTL, credential_window, is_container_name
from ..kueue.pods.pod_policy import PodPolicy, service_account_violation


@dataclass(frozen=True)
class Checkpointing:
    """Where shards checkpoint and how their pods reach it.

    :param conn_id: the Blob connection of Airflow (``wasb``-style fields). To give pods a SAS it must be able
        to sign one: the account key (connection string with ``AccountKey``, or ``login`` + ``password``) or
        an Azure identity allowed to get a user-delegation key.
    :param container: the base container: ledgers live here, each task instance's shard checkpoints in a
        container of its own named after it (``<container head>-<hash>``).
    :param credential_ttl: how long a Job's pod SAS is valid (from submission, and again from each
        reattach on account-key auth): the longest a Job may queue and run. A retry gets a new one; an
        ended attempt's SAS is revoked (account key). At most 7 days.
    :param workload_identity_service_account: on AKS, run the pods as this ServiceAccount (workload
        identity) instead of giving them a SAS; grant its identity access to the shard containers only.
    """

    conn_id: str
    container: str = "airflow-kueue"
    create_container: bool = True
    workload_identity_service_account: str | None = None
    keep_after_success: bool = False
    credential_ttl: timedelta = DEFAULT_CREDENTIAL_TTL

    def __post_init__(self) -> None:
        if not is_container_name(self.container):
            raise ValueError(
                f"Checkpointing(container={self.container!r}) is not a valid Blob container name: use 3-63 "
                "lowercase letters, digits and single hyphens, starting and ending with a letter or digit"
            )
        credential_window(datetime.now(UTC), self.credential_ttl)  # validates the TTL

    def pod_policy_problem(self, policy: PodPolicy) -> str | None:
        """The workload identity's ServiceAccount is the pods' too: the cluster's pod policy must allow it
        (checked before anything is created; the Job's own check ran before checkpointing shaped it)."""
        return service_account_violation(
            self.workload_identity_service_account, policy, "Checkpointing workload_identity_service_account"
        )

    @classmethod
    def from_param(
        cls, value: Checkpointing | dict[str, Any] | str | None, queue_timeout: float | None = None
    ) -> Checkpointing | None:
        """The operator's ``checkpointing=``; with ``queue_timeout`` (seconds), a pod credential that could
        expire while the Job may still wait in its queue is refused (ValueError naming both)."""
        if value is None or isinstance(value, Checkpointing):
            config = value
        elif isinstance(value, str):
            config = cls(conn_id=value)
        else:
            config = cls(**value)
        waits = timedelta(seconds=queue_timeout) if queue_timeout is not None else None
        if config is not None and waits is not None and config.credential_ttl <= waits:
            raise ValueError(
                f"credential_ttl={config.credential_ttl} is not longer than queue_timeout={waits}: a Job "
                "that waits that long gets pods whose SAS has expired; set Checkpointing(credential_ttl=...) "
                "above queue_timeout (at most 7 days) or lower queue_timeout"
            )
        return config
