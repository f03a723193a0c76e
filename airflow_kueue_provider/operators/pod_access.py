"""What a Job's pods may touch in Blob Storage (``kueue.checkpoints.checkpoint_access``): the shard
container of their task instance, through a SAS for it alone, handed over in a Secret the operator creates and
the Job owns (Kubernetes deletes it with the Job), named with a random suffix only the Job's pod env records.

On account-key auth the SAS is bound to a per-attempt stored access policy: refreshed on reattach, revoked
when the attempt ends, refused by a re-created container. With an Azure identity (user-delegation) it is
short-lived and the trigger re-signs it into the Secret, which pods also mount as a file (the kubelet
refreshes it). The account key never leaves Airflow.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ..hooks.kind_client import KindClient
from ..kueue.checkpoints.checkpoint_access import (
    ACCESS_ID_HEX,
    CredentialRenewal,
    access_policy_head,
    access_policy_id,
    credential_window,
    is_finished,
    sas_secret_name,
    secret_name_of,
    signed_sas_ttl,
)
from ..kueue.kinds import child_kind
from ..kueue.names import CHECKPOINT_SAS_ENV, CHECKPOINT_SAS_FILE_ENV, SAS_MOUNT_DIR, SAS_SECRET_KEY
from ..storage.blob_errors import BlobStoreError
from .checkpoint_place import CheckpointPlace

log = logging.getLogger(__name__)


def _access_id() -> str:
    return secrets.token_hex(ACCESS_ID_HEX // 2)


class PodAccess:
    """Signs, hands over, refreshes and revokes the pods' SAS for the shard container of ``place``."""

    def __init__(self, place: CheckpointPlace) -> None:
        self.place = place
        self._shaped = ("", _access_id())  # (object name, access id) the pods were last shaped for
        self._shaped_kind = child_kind().kind  # the kind of that object (its Secret's name says it)
        self._handed: dict[str, tuple[str, str, str]] = {}  # object name -> (namespace, Secret, object uid)

    @property
    def pods_use_sas(self) -> bool:
        return self.place.config.workload_identity_service_account is None

    @property
    def signed_ttl(self) -> timedelta:
        """How long each SAS this session signs is valid (``signed_sas_ttl``)."""
        return signed_sas_ttl(self.place.config.credential_ttl, self.place.hook.binds_sas_to_policy)

    def shaping(self, name: str, kind: str) -> None:
        """The pods of ``name`` (a ``kind``) are being shaped: their Secret gets a new random suffix."""
        self._shaped = (name, _access_id())
        self._shaped_kind = kind

    def secret_env(self, job_name: str | None, owner_kind: str | None) -> list[dict[str, Any]]:
        """The pod env that reads the SAS from ``job_name``'s Secret (also as the mounted file's path);
        none with workload identity, or for an unnamed object."""
        if not (self.pods_use_sas and job_name):
            return []
        secret = {"name": sas_secret_name(job_name, self._shaped[1], owner_kind), "key": SAS_SECRET_KEY}
        return [
            {"name": CHECKPOINT_SAS_ENV, "valueFrom": {"secretKeyRef": secret}},
            {"name": CHECKPOINT_SAS_FILE_ENV, "value": f"{SAS_MOUNT_DIR}/{SAS_SECRET_KEY}"},
        ]

    def sas_secret_name(self, job_name: str) -> str:
        """The SAS Secret the last shaping named for ``job_name`` (a random suffix: not derivable)."""
        return sas_secret_name(job_name, self._shaped[1], self._shaped_kind)

    def prepare_pod_access(self, job_name: str | None = None) -> str | None:
        """Create the task instance's shard container (kept across tries) and sign a SAS for it alone,
        bound (account key) to a new stored access policy of the Job (``job_name``, else the one shaped
        last). Returns the SAS token (None with workload identity). Called before the Job exists, so a
        connection that cannot sign fails the task with nothing created."""
        place = self.place
        salt = place.salt_to_create()
        place.hook.ensure_container(place.named(salt), place.prefix, salt)
        if not self.pods_use_sas:
            return None
        start, expiry = credential_window(datetime.now(UTC), self.signed_ttl)
        policy = access_policy_id(job_name or self._shaped[0], _access_id())
        return place.hook.container_sas(place.shard_container, start, expiry, policy)

    def ensure_pod_access(self, client: KindClient, obj: dict[str, Any]) -> None:
        """On reattach: a worker that died between creating the object and its Secret left pods that can
        never start, so create the Secret (one that exists is kept: 409); and the SAS already handed out
        is refreshed (account key: its policies' window moves to now + ``credential_ttl``). A finished
        object, or one whose pods get no SAS, needs nothing."""
        name = obj["metadata"]["name"]
        if not self.pods_use_sas or secret_name_of(obj) is None or is_finished(obj):
            return
        config, hook = self.place.config, self.place.hook
        start, expiry = credential_window(datetime.now(UTC), config.credential_ttl)
        refreshed = hook.binds_sas_to_policy and hook.extend_access(
            self.place.shard_container, access_policy_head(name), start, expiry
        )
        self._shaped = (name, self._shaped[1])
        token = self.prepare_pod_access(name)
        if self.hand_pods_their_sas(client, obj, token):
            log.warning("created the missing SAS Secret of %s %s (its worker died before)", client.noun, name)
            return
        self.revoke_pod_access(name, policy_of(token))  # the Secret exists: the new policy is unused
        if not hook.binds_sas_to_policy:
            log.info("%s %s: its trigger re-signs its pods' SAS into its Secret", client.noun, name)
        elif not refreshed:
            log.warning(
                "%s %s keeps the SAS it was given: it cannot be refreshed (its stored access policy is "
                "gone); a Job that waits longer than Checkpointing(credential_ttl=%s) gets pods whose "
                "SAS has expired: raise credential_ttl",
                client.noun,
                name,
                config.credential_ttl,
            )

    def revoke_pod_access(self, job_name: str, policy_id: str | None = None) -> None:
        """Drop the Job's stored access policies (or the one ``policy_id``): its SAS stops working. Blob
        trouble costs the revoke (the policy expires on its own), never the task."""
        if not self.pods_use_sas or not self.place.hook.binds_sas_to_policy:
            return
        try:
            self.place.hook.revoke_access(
                self.place.shard_container, policy_id or access_policy_head(job_name)
            )
        except BlobStoreError as exc:
            log.warning("could not revoke the SAS of %s (%s); it expires on its own", job_name, exc)

    def sas_secret(self, job: dict[str, Any], token: str) -> dict[str, Any]:
        """The Secret that hands the Job's pods their SAS, owned by the Job (or JobSet): it goes with it.
        Its name is the one the object's pod env reads; it is remembered as handed to the object (the
        trigger re-signs a user-delegation SAS into it)."""
        meta = job["metadata"]
        secret_name = secret_name_of(job)
        if secret_name is None:
            raise ValueError(f"{meta['name']}: its pods read no {CHECKPOINT_SAS_ENV} Secret (not shaped)")
        if meta.get("uid"):
            self._handed[meta["name"]] = (meta["namespace"], secret_name, str(meta["uid"]))
        default = child_kind()  # an object read without its type is the kind every pod runs in
        owner = {
            "apiVersion": job.get("apiVersion") or default.api.api_version,
            "kind": job.get("kind") or default.kind,
        }
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": secret_name,
                "namespace": meta["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [{**owner, "name": meta["name"], "uid": meta["uid"]}],
            },
            "stringData": {SAS_SECRET_KEY: token},
        }

    def hand_pods_their_sas(self, client: KindClient, obj: dict[str, Any], token: str | None) -> bool:
        """The Secret with the pods' SAS (``token``: None with workload identity), owned by the object
        (``hand_over_secret``). Returns whether it created the Secret."""
        if token is None:
            return False
        return hand_over_secret(client, obj, lambda: self.sas_secret(obj, token))

    def trigger_credential(self, job_name: str) -> dict[str, Any] | None:
        """What the trigger needs to keep ``job_name``'s pod SAS valid however long it waits or runs
        (``CredentialRenewal``): move its stored policies (account key), or re-sign it into the Secret
        handed to its pods (user-delegation). None where there is nothing to renew (workload identity, or
        no Secret handed: a finished object)."""
        if not self.pods_use_sas:
            return None
        place = self.place
        ttl = self.signed_ttl.total_seconds()
        common = (place.config.conn_id, place.config.container, place.shard_container)
        if place.hook.binds_sas_to_policy:
            return CredentialRenewal(*common, access_policy_head(job_name), ttl).to_dict()
        if (handed := self._handed.get(job_name)) is None:
            return None
        namespace, secret, uid = handed
        return CredentialRenewal(*common, "", ttl, True, namespace, secret, uid).to_dict()


def hand_over_secret(client: KindClient, obj: dict[str, Any], secret: Callable[[], dict[str, Any]]) -> bool:
    """Create the Secret ``secret()`` builds for ``obj``'s pods. The object was created suspended, and a pod
    that starts before its Secret exists waits for it (the kubelet retries). If the Secret cannot be made,
    the object goes too (unless it finished): its pods could never checkpoint. Returns whether it created
    the Secret (False: an earlier worker's exists)."""
    meta = obj["metadata"]
    try:
        if client.hook.create_secret(secret()):
            return True
        log.info("the Secret of %s %s exists already (an earlier worker's)", client.noun, meta["name"])
        return False
    except Exception:
        client.delete_unless_finished(meta["namespace"], meta["name"], uid=meta.get("uid"))
        raise


def policy_of(token: str | None) -> str | None:
    """The stored access policy id (``si=``) a SAS token is bound to, if any."""
    for part in (token or "").split("&"):
        key, _, value = part.partition("=")
        if key == "si":
            return value
    return None
