"""A third job kind that exists only in the tests: a RayJob-like object that ends by a status field, not a
condition. It is made of its own files only (this module): a description it registers, a trigger and an
operator on the shared bases. Nothing shared names it, which is the proof of the kind seam
(docs/design.md, "Job kinds")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kueue_provider.kueue.checkpoints.ledger import RunLedger
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.job_progress import Outcome
from airflow_kueue_provider.kueue.kinds import ApiCoordinates, Condition, KindDescription, register
from airflow_kueue_provider.kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE, QUEUE_NAME_LABEL
from airflow_kueue_provider.kueue.progress.followed_view import ever_admitted, is_admitted
from airflow_kueue_provider.kueue.progress.quota_guard import Unmanaged
from airflow_kueue_provider.kueue.progress.trigger_event import KueueEvent
from airflow_kueue_provider.kueue.progress.workload_state import WorkloadState, workload_state_from_dict
from airflow_kueue_provider.operators.failures import KueueTaskFailed
from airflow_kueue_provider.operators.kueue_operator import KueueOperator
from airflow_kueue_provider.operators.operator_kind import Shards
from airflow_kueue_provider.triggers.kueue_follow import KueueFollowTrigger
from airflow_kueue_provider.watch.following import Following
from airflow_kueue_provider.watch.snapshots import KindSnapshot

ENDED = {"SUCCEEDED": True, "FAILED": False}


class JobStatusEnd:
    """A RayJob ends when ``status.jobStatus`` says so: no condition to read."""

    def finished(self, obj: Mapping[str, Any]) -> Condition | None:
        status = obj.get("status") or {}
        if status.get("jobStatus") not in ENDED:
            return None
        return {"type": status["jobStatus"], "status": "True", "lastTransitionTime": status.get("endTime")}

    def succeeded(self, obj: Mapping[str, Any]) -> bool:
        return ENDED.get(str((obj.get("status") or {}).get("jobStatus")), False)


RAY = KindDescription(
    kind="FakeRayJob",
    api=ApiCoordinates("ray.example.io", "v1", "fakerayjobs"),
    key_prefix="rayjob",
    end=JobStatusEnd(),
    secret_tag="fakeray-",
    uid_sealed=False,
)


def register_fake_kind() -> KindDescription:
    return register(RAY)


@dataclass(frozen=True)
class RayView:
    """One moment of a FakeRayJob and its Workload (a ``FollowedView``)."""

    name: str
    namespace: str
    workload: WorkloadState | None
    suspended: bool
    finished_condition: Mapping[str, Any] | None
    ran: bool
    completions: int = 1

    @property
    def admitted(self) -> bool:
        return is_admitted(self.workload)

    @property
    def started(self) -> bool:
        return ever_admitted(self.workload, ran=self.ran)

    @property
    def done(self) -> int:
        return 1 if self.finished_condition else 0

    @property
    def active(self) -> int:
        return 0 if self.finished_condition or self.suspended else 1


def ray_view(obj: Mapping[str, Any], workload: Mapping[str, Any] | None) -> RayView:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return RayView(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        workload=workload_state_from_dict(workload) if workload else None,
        suspended=bool((obj.get("spec") or {}).get("suspend")),
        finished_condition=RAY.finished(obj),
        ran=bool(status.get("startTime")),
    )


class FakeRayTrigger(KueueFollowTrigger[RayView]):
    description = RAY

    def __init__(self, *, rayjob_name: str, rayjob_uid: str | None = None, **shared: Any) -> None:
        super().__init__(name=rayjob_name, uid=rayjob_uid, **shared)

    def _kind_kwargs(self) -> dict[str, Any]:
        return {"rayjob_name": self.name, "rayjob_uid": self.uid}

    def _view(self, snapshot: KindSnapshot) -> RayView:
        assert snapshot.obj is not None
        return ray_view(snapshot.obj, snapshot.workload)

    def _outcome(self, view: RayView) -> Outcome | None:
        if view.finished_condition is None:
            return None
        ok = view.finished_condition["type"] == "SUCCEEDED"
        return Outcome("success" if ok else "failed", f"{view.name}: {view.finished_condition['type']}")

    def _unmanaged(self, view: RayView, seconds_since_submit: float) -> Unmanaged | None:
        return None

    def _line(self, view: RayView, position: tuple[int, int] | None, waited: float | None) -> str:
        return f"{view.name}: {'running' if view.admitted else 'queued'}"

    def _start_overdue(self, view: RayView, since_admission: float) -> bool | None:
        return None

    async def _stuck_reason(self, following: Following, view: RayView) -> str | None:
        return None

    def _payload(self, view: RayView, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        return {"ray_status": (obj.get("status") or {}).get("jobStatus")}, {}


class FakeRayFailed(KueueTaskFailed):
    """The task's FakeRayJob failed."""


class FakeRayOperator(KueueOperator):
    description = RAY
    failure = FakeRayFailed
    trigger = FakeRayTrigger

    def __init__(self, *, entrypoint: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entrypoint = entrypoint

    def build_manifest(self, identity: AirflowIdentity) -> dict[str, Any]:
        labels = {**identity.labels(), MANAGED_BY_LABEL: MANAGED_BY_VALUE, QUEUE_NAME_LABEL: self.queue_name}
        return {
            "apiVersion": RAY.api.api_version,
            "kind": RAY.kind,
            "metadata": {
                "name": f"ray-{identity.task_id}-{identity.try_number}",
                "namespace": self.resolved_namespace(),
                "labels": labels,
                "annotations": identity.annotations(),
            },
            "spec": {"entrypoint": self.entrypoint, "suspend": True},
        }

    def _shard_count(self) -> int:
        return 1

    def _shards_to_run(
        self, shards: Shards, previous: list[dict[str, Any]]
    ) -> tuple[IndexSet, RunLedger | None]:
        return IndexSet.range(0, 1), None

    def _shape(self, manifest: dict[str, Any], shards: Shards, indexes: IndexSet) -> None:
        return None

    def _nothing_left(
        self, identity: AirflowIdentity, shards: Shards, ledger: RunLedger | None
    ) -> dict[str, Any]:
        return {}

    def _failed_by_job(self, event: KueueEvent) -> dict[str, str]:
        return {}
