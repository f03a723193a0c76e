"""``KueueHook``'s pod calls: the pods a Job controls and their log tails (a failed index's, one index's for
the UI). Logs are a courtesy: a log that cannot be read becomes a note saying why, never a failed call."""

from __future__ import annotations

import functools
import json
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..kueue.names import INDEX_LABEL, JOB_NAME_LABEL
from . import kueue_api
from .retry import call_with_retry
from .sync_client import SyncKueueClient


class SyncPodCalls(SyncKueueClient):
    """A Job's pods and their logs (mixed into ``KueueHook``)."""

    def pods_of_job(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        """The pods the Job controls (its ``job-name`` label pre-selects; anyone can set a label)."""
        core = client.CoreV1Api(self.api)
        selector = f"{JOB_NAME_LABEL}={job_name}"
        pods = self._items(
            functools.partial(core.list_namespaced_pod, namespace, label_selector=selector), "list pods"
        )
        return [p for p in pods if kueue_api.controlled_by_job(p, job_name)]

    def pods_of_job_bounded(
        self, namespace: str, job_name: str, most: int, page: int = 500
    ) -> list[dict[str, Any]]:
        """The pods the Job controls, read in pages of ``page`` and no more than ``most`` (a Job of
        thousands of pods is not read whole into one worker)."""
        core = client.CoreV1Api(self.api)
        selector = f"{JOB_NAME_LABEL}={job_name}"
        token: str | None = None
        found: list[dict[str, Any]] = []
        while len(found) < most:
            kwargs: dict[str, Any] = {
                "label_selector": selector,
                "limit": min(page, most - len(found)),
                **({"_continue": token} if token else {}),
            }
            answer = call_with_retry(
                functools.partial(core.list_namespaced_pod, namespace, _preload_content=False, **kwargs),
                "list pods",
            )
            body = json.loads(answer.data)
            found += list(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                break
        return [p for p in found if kueue_api.controlled_by_job(p, job_name)]

    def failed_index_log_tails(
        self, namespace: str, job_name: str, indexes: list[int], lines: int = 20
    ) -> dict[int, str]:
        """The last ``lines`` log lines of the newest pod of each failed index (best effort)."""
        by_index = kueue_api.pods_by_index(self.pods_of_job(namespace, job_name), job_name)
        tails: dict[int, str] = {}
        for index in indexes:
            candidates = by_index.get(index)
            if candidates:
                tails[index] = self._log_tail(namespace, candidates[0], lines)
        return tails

    def index_log_tail(
        self,
        namespace: str,
        job_name: str,
        index: int,
        lines: int,
        limit_bytes: int,
        job_uid: str | None = None,
    ) -> tuple[str, str] | None:
        """(pod name, its last ``lines`` log lines, at most ``limit_bytes``) of the newest pod of one index of
        a Job (``job_uid``: that very Job, its pods' controller); None when the index has no pod of the Job's
        (yet, or any longer). One index's pods by label, not the whole Job's (100,000 indexes, maybe)."""
        core = client.CoreV1Api(self.api)
        selector = f"{JOB_NAME_LABEL}={job_name},{INDEX_LABEL}={index}"
        found = self._items(
            functools.partial(core.list_namespaced_pod, namespace, label_selector=selector), "list pods"
        )
        pods = kueue_api.pods_by_index(found, job_name, job_uid).get(index)
        if not pods:
            return None
        return pods[0]["metadata"]["name"], self._log_tail(namespace, pods[0], lines, limit_bytes)

    def _log_tail(
        self, namespace: str, pod: dict[str, Any], lines: int, limit_bytes: int | None = None
    ) -> str:
        """A pod's log tail, or why it cannot be read (logs are a courtesy: never the reason a call fails)."""
        core = client.CoreV1Api(self.api)
        limit = {"limit_bytes": limit_bytes} if limit_bytes else {}
        try:
            # The raw body: with the body preloaded, the client turns a log that is not JSON into str(bytes),
            # "b'...\\n'", for every kubelet (it decodes only JSON response types).
            answer = core.read_namespaced_pod_log(
                pod["metadata"]["name"],
                namespace,
                tail_lines=lines,
                _request_timeout=10,
                _preload_content=False,
                **limit,
            )
            return pod_log_text(answer.data)
        except Exception as exc:
            return no_logs_note(pod, exc)


def pod_log_text(body: bytes | str) -> str:
    """A pod log's bytes as text (a log is whatever the program wrote: undecodable bytes are replaced)."""
    return body if isinstance(body, str) else body.decode("utf-8", errors="replace")


def no_logs_note(pod: dict[str, Any], exc: Exception) -> str:
    """What stands in for a failed pod's logs when they cannot be read: why, then how the pod ended.

    A 404 for ``pods/log`` means the node's kubelet has no logs for the pod; a terminated container with no
    ``containerID`` never ran in a container runtime: a fake pod of KWOK (the local cluster's nodes), which
    has no logs at all. A 404 for the pod itself: it was deleted meanwhile. Any other error (403, a timeout,
    ...) is named as it came."""
    name = pod.get("metadata", {}).get("name", "?")
    status = getattr(exc, "status", None)
    body = _api_body(exc) if isinstance(exc, ApiException) else {}
    if isinstance(exc, ApiException) and status == 404:
        if (body.get("details") or {}).get("kind") == "pods":
            why = f"pod {name} is gone: deleted before its logs were read"
        elif _never_ran_in_a_runtime(pod):
            why = (
                f"pod {name}'s logs are not available: it is a fake pod (KWOK, no container runtime) "
                "and has none"
            )
        else:
            why = f"pod {name}'s logs are not available: its node's kubelet has none (HTTP 404)"
    elif isinstance(exc, ApiException):
        message = f": {str(body['message'])[:200]}" if body.get("message") else ""
        why = f"pod {name}'s logs could not be read: HTTP {status} {exc.reason}{message}"
    else:
        why = f"pod {name}'s logs could not be read: {type(exc).__name__}: {str(exc)[:200]}"
    return f"({why}; {_status_line(pod)})"


def _never_ran_in_a_runtime(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return bool(statuses) and not any(s.get("containerID") for s in statuses)


def _api_body(exc: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _status_line(pod: dict[str, Any]) -> str:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        term = (status.get("state") or {}).get("terminated")
        if term:
            name, code = status.get("name"), term.get("exitCode")
            said = ": ".join(str(part)[:200] for part in (term.get("reason"), term.get("message")) if part)
            return f"container {name} exited with code {code}" + (f" ({said})" if said else "")
    return f"pod phase {pod.get('status', {}).get('phase')}"
