"""What stands in for a failed index's log tail when its pod's logs cannot be read."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from airflow_kueue_provider.hooks import kueue_api
from airflow_kueue_provider.hooks.kueue_hook import KueueHook, no_logs_note

FAKE_FAILURE = "kwok: index failed on purpose (kwok.airflow-kueue.io/fail-indexes)"  # the bed's KWOK stage
NO_LOG_SUBRESOURCE = json.dumps(  # what the apiserver answered for a KWOK pod's logs on the bed
    {
        "kind": "Status",
        "message": "the server could not find the requested resource ( pods/log job-3-abcde)",
        "reason": "NotFound",
        "details": {"name": "job-3-abcde", "kind": "pods/log"},
        "code": 404,
    }
)


def not_found(body: str = NO_LOG_SUBRESOURCE) -> ApiException:
    """A 404 as every supported client raises it (clients before 33 have no NotFoundException subclass)."""
    exc = ApiException(status=404, reason="Not Found")
    exc.body = body
    return exc


def pod(name: str, index: int, container_id: str | None = None, message: str | None = None) -> dict[str, Any]:
    terminated = {"exitCode": 1, "reason": "Error", **({"message": message} if message else {})}
    status: dict[str, Any] = {"name": "main", "state": {"terminated": terminated}}
    if container_id:
        status["containerID"] = container_id
    return {
        "metadata": {
            "name": name,
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
            "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
            "creationTimestamp": "2026-12-02T06:00:00Z",
            "ownerReferences": [{"kind": "Job", "name": "job", "uid": "job-uid", "controller": True}],
        },
        "status": {"phase": "Failed", "containerStatuses": [status]},
    }


def test_a_fake_pod_has_no_logs_and_the_note_says_so_with_the_exit_code() -> None:
    note = no_logs_note(pod("job-3-abcde", 3, message=FAKE_FAILURE), not_found())
    assert note == (
        "(pod job-3-abcde's logs are not available: it is a fake pod (KWOK, no container runtime) and has "
        "none; container main exited with code 1 (Error: kwok: index failed on purpose "
        "(kwok.airflow-kueue.io/fail-indexes)))"
    )
    assert "NotFoundException" not in note


def test_a_pod_deleted_before_its_logs_were_read() -> None:
    gone = json.dumps({"message": 'pods "job-3-abcde" not found', "details": {"kind": "pods"}, "code": 404})
    assert no_logs_note(pod("job-3-abcde", 3), not_found(gone)) == (
        "(pod job-3-abcde is gone: deleted before its logs were read; container main exited with code 1 "
        "(Error))"
    )


def test_a_real_pod_without_logs_names_the_kubelet() -> None:
    real = pod("job-3-abcde", 3, container_id="containerd://0123")
    note = no_logs_note(real, not_found())
    assert note == (
        "(pod job-3-abcde's logs are not available: its node's kubelet has none (HTTP 404); container main "
        "exited with code 1 (Error))"
    )


def test_other_errors_are_named_as_they_came() -> None:
    forbidden = ApiException(status=403, reason="Forbidden")
    forbidden.body = json.dumps(
        {"message": 'pods "job-3-abcde" is forbidden: cannot get resource "pods/log"'}
    )
    assert no_logs_note(pod("job-3-abcde", 3), forbidden) == (
        '(pod job-3-abcde\'s logs could not be read: HTTP 403 Forbidden: pods "job-3-abcde" is forbidden: '
        'cannot get resource "pods/log"; container main exited with code 1 (Error))'
    )
    timeout = no_logs_note(pod("job-3-abcde", 3), TimeoutError("read timed out"))
    assert timeout == (
        "(pod job-3-abcde's logs could not be read: TimeoutError: read timed out; container main exited with "
        "code 1 (Error))"
    )
    pending = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    assert no_logs_note(pending, ApiException(status=404, reason="Not Found")) == (
        "(pod p's logs are not available: its node's kubelet has none (HTTP 404); pod phase Pending)"
    )


def test_failed_index_log_tails_mixes_logs_and_notes() -> None:
    hook = KueueHook.__new__(KueueHook)
    hook.__dict__["api"] = mock.Mock()
    pods = [pod("job-1-aaaaa", 1, container_id="containerd://1"), pod("job-3-bbbbb", 3)]

    def read_log(name: str, namespace: str, **kwargs: Any) -> mock.Mock:
        assert kwargs["_preload_content"] is False, "the raw body: preloaded, the client makes it str(bytes)"
        if name == "job-1-aaaaa":
            return mock.Mock(data=b"Traceback ...\nValueError: bad input\n")
        raise not_found()

    core = mock.Mock(read_namespaced_pod_log=mock.Mock(side_effect=read_log))
    with (
        mock.patch.object(KueueHook, "pods_of_job", return_value=pods),
        mock.patch.object(client, "CoreV1Api", return_value=core),
    ):
        tails = hook.failed_index_log_tails("ns", "job", [1, 3, 5])
    assert tails == {
        1: "Traceback ...\nValueError: bad input\n",
        3: "(pod job-3-bbbbb's logs are not available: it is a fake pod (KWOK, no container runtime) and has "
        "none; container main exited with code 1 (Error))",
    }


def test_index_log_tail_reads_one_indexs_newest_pod_by_label_bounded() -> None:
    hook = KueueHook.__new__(KueueHook)
    hook.__dict__["api"] = mock.Mock()
    older, newer = pod("job-3-old", 3), pod("job-3-new", 3)
    newer["metadata"]["creationTimestamp"] = "2026-12-02T07:00:00Z"
    core = mock.Mock()
    core.list_namespaced_pod.return_value = mock.Mock(data=json.dumps({"items": [older, newer]}))
    core.read_namespaced_pod_log.return_value = mock.Mock(data=b"last lines \xff\n")
    with mock.patch.object(client, "CoreV1Api", return_value=core):
        tail = hook.index_log_tail("ns", "job", 3, lines=200, limit_bytes=65536)
        assert tail == ("job-3-new", "last lines \ufffd\n"), "text; undecodable bytes replaced"
        core.list_namespaced_pod.return_value = mock.Mock(data=b'{"items": []}')
        assert hook.index_log_tail("ns", "job", 4, lines=200, limit_bytes=65536) is None
    first, _ = core.list_namespaced_pod.call_args_list
    assert first.kwargs["_preload_content"] is False, "the API's JSON, not the client's models"
    assert first.kwargs["label_selector"] == (
        "batch.kubernetes.io/job-name=job,batch.kubernetes.io/job-completion-index=3"
    ), "one index's pods, never the whole Job's"
    core.read_namespaced_pod_log.assert_called_once_with(
        "job-3-new", "ns", tail_lines=200, _request_timeout=10, _preload_content=False, limit_bytes=65536
    )


def test_a_pod_that_only_carries_the_jobs_labels_is_not_the_jobs() -> None:
    """Another tenant may create a pod with the Job's job-name and index labels: its log is never shown."""
    planted = pod("job-3-planted", 3)
    planted["metadata"]["ownerReferences"] = []
    planted["metadata"]["creationTimestamp"] = "2026-12-02T09:00:00Z"  # newer than the Job's own
    other_uid = pod("job-3-other", 3)
    other_uid["metadata"]["ownerReferences"][0]["uid"] = "another-job-of-that-name"
    ours = pod("job-3-ours", 3)
    assert kueue_api.pods_by_index([planted, ours], "job") == {3: [ours]}
    assert kueue_api.pods_by_index([other_uid, ours], "job", "job-uid") == {3: [ours]}
    assert kueue_api.pods_by_index([planted], "job") == {}
