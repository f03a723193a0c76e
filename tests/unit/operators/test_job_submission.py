"""Submit or adopt with the identity seal, over a fake kind client (operators/job_submission.py)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.identity.identity_seal import IdentitySeal
from airflow_kueue_provider.kueue.kinds.job import JOB
from airflow_kueue_provider.kueue.kinds.jobset import JOBSET
from airflow_kueue_provider.kueue.names import SEAL_ANNOTATION, UID_SEAL_ANNOTATION
from airflow_kueue_provider.operators.job_submission import (
    CreateForbidden,
    JobNotOurs,
    KindNotServed,
    ListForbidden,
    checked_local_queues,
    create_or_adopt_object,
    delete_task_instance_objects,
    sealed_previous,
)

from ..kueue.identity.test_identity_seal import SEAL, TRY_1, TRY_2, obj


class FakeClient:
    """A Job client over a dict of objects; records patches and deletes."""

    noun = "Job"
    uid_sealed = True
    kind = JOB

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {o["metadata"]["name"]: o for o in objs}
        self.patched: list[tuple[str, dict[str, Any], str | None]] = []
        self.deleted: list[tuple[str, str | None]] = []

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objs.get(name)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["metadata"]["name"] in self.objs:
            raise ApiException(status=409, reason="AlreadyExists")
        created = {**body, "metadata": {**body["metadata"], "uid": "new-uid"}}
        self.objs[body["metadata"]["name"]] = created
        return created

    def task_instance_objects(self, namespace: str, identity: AirflowIdentity) -> list[dict[str, Any]]:
        return list(self.objs.values())

    def patch_metadata(
        self, namespace: str, name: str, metadata: dict[str, Any], uid: str | None = None
    ) -> None:
        self.patched.append((name, metadata, uid))

    def delete_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        self.deleted.append((name, uid))
        return "deleted"

    def seal_manifest(self, manifest: dict[str, Any], annotations: dict[str, str]) -> None:
        manifest["metadata"].setdefault("annotations", {}).update(annotations)

    def seal_uid(self, obj: dict[str, Any], seal: IdentitySeal) -> None:
        annotations = seal.uid_annotations(self.noun, obj)
        self.patch_metadata(
            "team-a", obj["metadata"]["name"], {"annotations": annotations}, obj["metadata"]["uid"]
        )
        obj["metadata"].setdefault("annotations", {}).update(annotations)


def _manifest(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team-a", "annotations": TRY_2.annotations()}}


def test_a_created_job_carries_its_name_seal_and_gets_its_uid_seal_right_after() -> None:
    client = FakeClient()
    made = create_or_adopt_object(client, _manifest("n-try-2"), TRY_2, SEAL)  # type: ignore[arg-type]
    annotations = made.job["metadata"]["annotations"]
    assert not made.reattached
    assert annotations[SEAL_ANNOTATION] == SEAL.seal("Job", "team-a", "n-try-2", TRY_2)
    assert annotations[UID_SEAL_ANNOTATION] == SEAL.uid_seal("Job", "team-a", "n-try-2", "new-uid")
    assert client.patched[0][2] == "new-uid"  # conditioned on the uid: never onto a namesake


def test_a_409_on_an_object_without_the_seal_is_not_adopted() -> None:
    squatter = obj(TRY_2, "n-try-2", seal=None)
    client = FakeClient(squatter)
    with pytest.raises(JobNotOurs, match="lacks the task's seal"):
        create_or_adopt_object(client, _manifest("n-try-2"), TRY_2, SEAL)  # type: ignore[arg-type]
    copy_of = obj(TRY_2, "n-try-2", uid="another")
    copy_of["metadata"]["annotations"][UID_SEAL_ANNOTATION] = SEAL.uid_seal(
        "Job", "team-a", "n-try-2", "uid-1"
    )
    with pytest.raises(JobNotOurs):
        create_or_adopt_object(FakeClient(copy_of), _manifest("n-try-2"), TRY_2, SEAL)  # type: ignore[arg-type]
    assert client.patched == []


def test_a_409_on_this_try_s_sealed_job_adopts_it_and_writes_the_missing_uid_seal() -> None:
    crashed = obj(TRY_2, "n-try-2", uid_sealed=False)
    client = FakeClient(crashed)
    adopted = create_or_adopt_object(client, _manifest("n-try-2"), TRY_2, SEAL)  # type: ignore[arg-type]
    assert adopted.reattached and adopted.job is crashed
    assert SEAL.uid_seal_state("Job", crashed) == "valid" and client.patched[0][2] == "uid-1"


def test_previous_keeps_the_sealed_deletes_the_unconfirmed_and_says_the_ignored_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sealed = obj(TRY_1, "try-1", finished=True)
    crashed = obj(TRY_1, "try-1-crashed", uid="u2", uid_sealed=False)
    forged = obj(TRY_1, "forged", seal=None, finished=True)
    client = FakeClient(sealed, crashed, forged)
    with caplog.at_level(logging.WARNING):
        ours = sealed_previous(client, "team-a", TRY_2, SEAL)  # type: ignore[arg-type]
    assert ours == [sealed]
    assert client.deleted == [("try-1-crashed", "u2")]
    ignored = [
        r for r in caplog.records if "ignored: carries this task's labels but not its seal" in r.message
    ]
    assert len(ignored) == 1 and "forged" in ignored[0].message


def test_a_kill_deletes_every_sealed_object_of_the_task_instance_and_nothing_else() -> None:
    first = obj(TRY_2, "n-try-2", uid="u1")
    spill = obj(TRY_2, "n-try-2-spill", uid="u2", uid_sealed=False)  # killed before its uid seal
    forged = obj(TRY_2, "forged", seal=None)
    client = FakeClient(first, spill, forged)
    done = delete_task_instance_objects(client, "team-a", TRY_2, SEAL)  # type: ignore[arg-type]
    assert set(done) == {"n-try-2", "n-try-2-spill"}
    assert sorted(client.deleted) == [("n-try-2", "u1"), ("n-try-2-spill", "u2")]


@pytest.mark.parametrize(
    ("message", "fix"),
    [
        (
            'jobs.batch is forbidden: User "sa" cannot create resource "jobs"',
            "apply the jobs rule of deploy/rbac",
        ),
        ("admission webhook / ValidatingAdmissionPolicy 'x' denied request: spec.volumes", "names the field"),
    ],
)
def test_a_refused_create_fails_the_task_with_the_apiservers_reason_and_what_to_do(
    message: str, fix: str
) -> None:
    client = FakeClient()
    error = ApiException(status=403, reason="Forbidden")
    error.body = json.dumps({"message": message})

    def refuse_with_body(body: dict[str, Any]) -> dict[str, Any]:
        raise error

    client.create = refuse_with_body  # type: ignore[method-assign]
    with pytest.raises(CreateForbidden, match=fix) as failed:
        create_or_adopt_object(client, _manifest("n-try-2"), TRY_2, SEAL)  # type: ignore[arg-type]
    assert "Nothing was created" in str(failed.value) and message.split(":")[0] in str(failed.value)


class Queues:
    """LocalQueues by name; counts the reads."""

    def __init__(self, *names: str) -> None:
        self.names, self.reads = names, 0

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        return {"metadata": {"name": name}, "spec": {"clusterQueue": "cq"}} if name in self.names else None

    def list_local_queues(self, namespace: str) -> list[dict[str, Any]]:
        return [{"metadata": {"name": n}} for n in self.names]


def test_the_given_local_queues_are_read_once_each_and_a_missing_one_is_named() -> None:
    from airflow_kueue_provider.airflow_compat import AirflowFailException

    hook: Any = Queues("lq", "od")
    read = checked_local_queues(hook, "ns", {"queue_name": "lq", "on_deadline_risk spill_to": None}, "t")
    assert list(read) == ["lq"] and read["lq"]["spec"]["clusterQueue"] == "cq" and hook.reads == 1
    with pytest.raises(AirflowFailException, match=r"LocalQueue 'gone' does not exist .* set on_deadline"):
        checked_local_queues(hook, "ns", {"queue_name": "lq", "on_deadline_risk spill_to": "gone"}, "t")


def _refusing(status: int, body: str) -> ApiException:
    error = ApiException(status=status, reason="Not Found" if status == 404 else "Forbidden")
    error.body = body
    return error


def test_a_kind_the_cluster_does_not_serve_fails_the_create_with_what_to_install() -> None:
    client = FakeClient()
    client.kind = JOBSET  # type: ignore[assignment]

    def not_found(body: dict[str, Any]) -> dict[str, Any]:
        raise _refusing(404, "404 page not found")  # the apiserver knows no such group/version

    client.create = not_found  # type: ignore[method-assign]
    with pytest.raises(KindNotServed) as failed:
        create_or_adopt_object(client, _manifest("n-try-1"), TRY_1, SEAL)  # type: ignore[arg-type]
    said = str(failed.value)
    assert (
        "does not serve jobset.x-k8s.io/v1alpha2 jobsets" in said and "install the JobSet controller" in said
    )
    assert "Nothing was created" in said


def test_a_404_for_a_missing_namespace_is_not_called_a_missing_kind() -> None:
    client = FakeClient()
    gone = json.dumps({"reason": "NotFound", "details": {"name": "team-a", "kind": "namespaces"}})

    def not_found(body: dict[str, Any]) -> dict[str, Any]:
        raise _refusing(404, gone)

    client.create = not_found  # type: ignore[method-assign]
    with pytest.raises(ApiException):
        create_or_adopt_object(client, _manifest("n-try-1"), TRY_1, SEAL)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "error", "says"),
    [(404, KindNotServed, "does not serve batch/v1 jobs"), (403, ListForbidden, "apply the jobs rule")],
)
def test_a_retry_that_cannot_list_its_kind_fails_before_anything_is_created(
    status: int, error: type[Exception], says: str
) -> None:
    client = FakeClient()

    def refused(namespace: str, identity: AirflowIdentity) -> list[dict[str, Any]]:
        raise _refusing(status, "")

    client.task_instance_objects = refused  # type: ignore[method-assign]
    with pytest.raises(error, match=says) as failed:
        sealed_previous(client, "team-a", TRY_2, SEAL)  # type: ignore[arg-type]
    assert "Nothing was created" in str(failed.value)
