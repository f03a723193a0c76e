"""Submit a Job for a task try, or reattach to the one that already exists (no try ever makes two Jobs)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from ..airflow_compat import AirflowFailException
from ..hooks.kind_client import KindClient
from ..hooks.kueue_hook import KueueHook
from ..kueue import kinds
from ..kueue.errors import KueueProviderError
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.identity.identity_seal import IdentitySeal
from ..kueue.identity.job_ownership import belongs_to_try, needs_uid_seal, sort_by_seal
from ..kueue.job_progress import finished_condition
from ..kueue.names import TRY_NUMBER_LABEL
from .shard_session import ShardSession

log = logging.getLogger(__name__)


WEBHOOK_FAILURE = "failed calling webhook"


class KueueWebhookUnavailable(RuntimeError, KueueProviderError):
    """The apiserver could not reach an admission webhook (Kueue's) when creating the Job."""


class CreateForbidden(AirflowFailException, KueueProviderError):
    """The apiserver refused the create (403): the identity lacks the right, or an admission policy refused
    the object. Not retried: the same request is refused again."""


class KindNotServed(AirflowFailException, KueueProviderError):
    """The apiserver does not serve the task's kind (404 on its resource): its CRD or controller is missing.
    Not retried: nothing changes until someone installs it."""


class ListForbidden(AirflowFailException, KueueProviderError):
    """The identity may not list the task's kind (403), so it cannot tell which objects it may adopt."""


def not_served(client: KindClient, namespace: str, exc: ApiException) -> KindNotServed | None:
    """The error for a 404 on the kind's resource itself (None for another 404: a missing namespace)."""
    try:
        details = json.loads(exc.body).get("details") or {}
    except (TypeError, ValueError, AttributeError):
        details = {}  # "404 page not found": the apiserver knows no such group/version
    if exc.status != 404 or details.get("kind") == "namespaces":
        return None
    api, install = client.kind.api, client.kind.served_by
    return KindNotServed(
        f"the cluster does not serve {api.api_version} {api.plural} (HTTP 404 in namespace {namespace})"
        + (f": install {install}" if install else "")
        + ". Nothing was created."
    )


def _api_message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


class JobNotOurs(RuntimeError, KueueProviderError):
    """A Job with this try's name exists but was made for another task instance (or by someone else: no
    valid seal)."""


@dataclass(frozen=True)
class Submission:
    job: dict[str, Any]
    reattached: bool
    reason: str


def _finished(job: dict[str, Any]) -> str | None:
    cond = finished_condition(job)
    return None if cond is None else str(cond["type"])


def reattachable(previous: list[dict[str, Any]], *, completed_counts: bool = True) -> Submission | None:
    """Of ``previous`` (the sealed ones: ``sealed_previous``): 1. a live Job of an earlier try (or of this
    one) -> reattach; 2. a Complete one -> reattach, so nothing finished is redone (with checkpointing the
    ledger decides instead, so ``completed_counts`` is off)."""
    live = [j for j in previous if _finished(j) is None]
    if live:
        return Submission(live[-1], True, "a Job of this task is still running")
    complete = [j for j in previous if kinds.succeeded(j)]
    if complete and completed_counts:
        return Submission(complete[-1], True, "a Job of this task already completed")
    return None


def create_or_adopt_object(
    client: KindClient, manifest: dict[str, Any], identity: AirflowIdentity, seal: IdentitySeal
) -> Submission:
    """Create this try's object, sealed (its name seal in the manifest; a Job's uid seal patched right after).
    Its name is deterministic per try, so a worker that died right after creating it finds it again through
    the 409 and adopts it -- only with a valid seal, writing the uid seal if the worker died before it."""
    kind, meta = client.noun, manifest["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    client.seal_manifest(manifest, seal.annotations(kind, namespace, name, identity))
    try:
        created = client.create(manifest)
    except ApiException as exc:
        if (missing := not_served(client, namespace, exc)) is not None:
            raise missing from None
        if exc.status != 409 and WEBHOOK_FAILURE in str(exc.body or ""):
            raise KueueWebhookUnavailable(
                f"creating {kind} {namespace}/{name} failed after retries because "
                f"an admission webhook did not answer ({_api_message(exc)}). Kueue's webhook must answer "
                f"for a queued {kind} to be created: check that the Kueue controller runs and is ready "
                "(kueue-controller-manager) and its MutatingWebhookConfiguration. Nothing was created."
            ) from None  # the message has what matters; the response's headers do not belong in a task log
        if exc.status == 403:
            said = _api_message(exc)
            fix = (
                "the message names the field to change"
                if "admission" in said.lower()
                else "the kubernetes connection's identity may not create them: apply the "
                f"{kind.lower()}s rule of deploy/rbac/worker-triggerer.yaml"
            )
            raise CreateForbidden(
                f"creating {kind} {namespace}/{name} was refused (HTTP 403: {said}); {fix}. "
                "Nothing was created."
            ) from None
        if exc.status != 409:
            raise
    else:
        if client.uid_sealed:
            client.seal_uid(created, seal)
        return Submission(created, False, "created")
    job = client.get(namespace, name)
    if (
        job is None
        or not belongs_to_try(job, identity)
        or not seal.is_sealed(kind, job)
        or (client.uid_sealed and seal.uid_seal_state(kind, job) == "invalid")
    ):
        raise JobNotOurs(
            f"{kind} {namespace}/{name} exists but was not created for this task "
            "instance and try (it lacks the task's seal); it is left alone: delete it yourself, or set "
            "job_name_prefix to another name"
        )
    return adopted(
        client, Submission(job, True, f"this try's {kind} already exists (the worker restarted)"), seal
    )


def adopted(client: KindClient, submission: Submission, seal: IdentitySeal) -> Submission:
    """``submission`` with its object's uid seal written if its worker died before writing it."""
    if needs_uid_seal(submission.job, seal, client.noun, client.uid_sealed):
        client.seal_uid(submission.job, seal)
    return submission


def sealed_previous(
    client: KindClient, namespace: str, identity: AirflowIdentity, seal: IdentitySeal, logger: Any = log
) -> list[dict[str, Any]]:
    """The task instance's objects it may adopt (``kueue.identity.job_ownership.sort_by_seal``). The
    others: an earlier try's live Job whose uid seal was never written is deleted (by uid); anything else that
    carries the task's labels without its seal is left alone and said once. A kind the cluster does not serve
    (404) or the identity may not list (403) fails with what to do, before anything is created."""
    try:
        listed = client.task_instance_objects(namespace, identity)
    except ApiException as exc:
        if (missing := not_served(client, namespace, exc)) is not None:
            raise missing from None
        if exc.status == 403:
            plural = client.kind.api.plural
            raise ListForbidden(
                f"cannot list {plural} in namespace {namespace} (HTTP 403): the kubernetes connection's "
                f"identity may not; apply the {plural} rule of deploy/rbac/worker-triggerer.yaml. "
                "Nothing was created."
            ) from None
        raise
    found = sort_by_seal(listed, identity, seal, client.noun, client.uid_sealed)
    for obj in found.ignored:
        logger.warning(
            "%s %s/%s ignored: carries this task's labels but not its seal (not adopted, not deleted)",
            client.noun,
            namespace,
            obj["metadata"]["name"],
        )
    for obj in found.unconfirmed:
        meta = obj["metadata"]
        what = client.delete_unless_finished(namespace, meta["name"], uid=meta.get("uid"))
        logger.warning(
            "%s %s/%s of try %s has no uid seal (its worker died after creating it): not adopted; %s",
            client.noun,
            namespace,
            meta["name"],
            (meta.get("annotations") or {}).get(TRY_NUMBER_LABEL, "?"),
            what,
        )
    return found.ours


def earlier_objects(
    client: KindClient,
    namespace: str,
    identity: AirflowIdentity,
    seal: IdentitySeal,
    shards: ShardSession,
    logger: Any = log,
) -> list[dict[str, Any]]:
    """The objects of the task instance it may adopt (``sealed_previous``). A first try lists none unless its
    record knows an attempt: no earlier try left one, and its own (a worker that died right after creating
    it) comes back through the create's 409 (``create_or_adopt_object``)."""
    if identity.try_number <= 1 and not shards.has_recorded_attempts():
        return []
    return sealed_previous(client, namespace, identity, seal, logger)


def delete_task_instance_objects(
    client: KindClient, namespace: str, identity: AirflowIdentity, seal: IdentitySeal
) -> dict[str, str]:
    """Every live object of the task instance that carries its seal goes (a kill: the spill Job and one
    created mid-escalation too, not only the one the task last waited on); name -> what happened."""
    found = sort_by_seal(
        client.task_instance_objects(namespace, identity), identity, seal, client.noun, client.uid_sealed
    )
    done = {}
    for obj in found.ours + found.unconfirmed:
        meta = obj["metadata"]
        done[meta["name"]] = client.delete_unless_finished(namespace, meta["name"], uid=meta.get("uid"))
    return done


def check_local_queue(hook: KueueHook, namespace: str, name: str, param: str, task_id: str) -> dict[str, Any]:
    """LocalQueue ``name`` (given as ``param``), as read (the forecast reuses it); the task fails before
    anything is created when it is missing, naming the LocalQueues there are."""
    if (queue := hook.get_local_queue(namespace, name)) is not None:
        return queue
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


def checked_local_queues(
    hook: KueueHook, namespace: str, given: Mapping[str, str | None], task_id: str
) -> dict[str, dict[str, Any]]:
    """``check_local_queue`` for each queue ``given`` (parameter -> name; None: not given), in order: the
    LocalQueues as read, by name (the forecast reads them no more)."""
    named = [(param, name) for param, name in given.items() if name]
    return {name: check_local_queue(hook, namespace, name, param, task_id) for param, name in named}
