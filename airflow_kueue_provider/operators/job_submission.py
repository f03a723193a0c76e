"""Submit a Job for a task try, or reattach to the one that already exists (no try ever makes two Jobs)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from ..airflow_compat import AirflowFailException
from ..hooks.kueue_hook import KueueHook
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.job_ownership import belongs_to_try
from ..kueue.job_progress import finished_condition

log = logging.getLogger(__name__)


WEBHOOK_FAILURE = "failed calling webhook"


class KueueWebhookUnavailable(RuntimeError):
    """The apiserver could not reach an admission webhook (Kueue's) when creating the Job."""


def _api_message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


class JobNotOurs(RuntimeError):
    """A Job with this try's name exists but was made for another task instance (or by someone else)."""


@dataclass(frozen=True)
class Submission:
    job: dict[str, Any]
    reattached: bool
    reason: str


def _finished(job: dict[str, Any]) -> str | None:
    cond = finished_condition(job)
    return None if cond is None else str(cond["type"])


def reattachable(previous: list[dict[str, Any]], *, completed_counts: bool = True) -> Submission | None:
    """1. a live Job of an earlier try (or of this one) -> reattach; 2. a Complete one -> reattach, so nothing
    finished is redone (with checkpointing the ledger decides instead, so ``completed_counts`` is off)."""
    live = [j for j in previous if _finished(j) is None]
    if live:
        return Submission(live[-1], True, "a Job of this task is still running")
    complete = [j for j in previous if _finished(j) in ("Complete", "Completed")]  # a Job's, a JobSet's
    if complete and completed_counts:
        return Submission(complete[-1], True, "a Job of this task already completed")
    return None


def create_or_adopt(hook: KueueHook, manifest: dict[str, Any], identity: AirflowIdentity) -> Submission:
    """Create this try's Job. Its name is deterministic per try, so a worker that died right after creating
    it finds it again through the 409 and adopts it (after checking it is really this task's)."""
    return create_or_adopt_object(hook.create_job, hook.get_job, manifest, identity, "Job")


def create_or_adopt_object(
    create: Callable[[dict[str, Any]], dict[str, Any]],
    read: Callable[[str, str], dict[str, Any] | None],
    manifest: dict[str, Any],
    identity: AirflowIdentity,
    kind: str,
) -> Submission:
    """``create_or_adopt`` for any kind the provider submits (a Job, a JobSet)."""
    namespace = manifest["metadata"]["namespace"]
    try:
        return Submission(create(manifest), False, "created")
    except ApiException as exc:
        if exc.status != 409 and WEBHOOK_FAILURE in str(exc.body or ""):
            raise KueueWebhookUnavailable(
                f"creating {kind} {namespace}/{manifest['metadata']['name']} failed after retries because "
                f"an admission webhook did not answer ({_api_message(exc)}). Kueue's webhook must answer "
                f"for a queued {kind} to be created: check that the Kueue controller runs and is ready "
                "(kueue-controller-manager) and its MutatingWebhookConfiguration. Nothing was created."
            ) from None  # the message has what matters; the response's headers do not belong in a task log
        if exc.status != 409:
            raise
    job = read(namespace, manifest["metadata"]["name"])
    if job is None or not belongs_to_try(job, identity):
        raise JobNotOurs(
            f"{kind} {namespace}/{manifest['metadata']['name']} exists but was not created for this task "
            "instance and try; it is left alone: delete it yourself, or set job_name_prefix to another name"
        )
    return Submission(job, True, f"this try's {kind} already exists (the worker restarted)")


def check_local_queue(hook: KueueHook, namespace: str, name: str, param: str, task_id: str) -> None:
    """Fail the task before anything is created when LocalQueue ``name`` (given as ``param``) is missing,
    naming the LocalQueues there are."""
    if hook.get_local_queue(namespace, name) is not None:
        return
    existing = sorted(q["metadata"]["name"] for q in hook.list_local_queues(namespace))
    have = (
        f"LocalQueues in {namespace}: {', '.join(existing)}"
        if existing
        else f"there is no LocalQueue in namespace {namespace}"
    )
    raise AirflowFailException(
        f"{task_id}: LocalQueue {name!r} does not exist in namespace {namespace!r} ({have}); "
        f"set {param} to one of them or create it"
    )
