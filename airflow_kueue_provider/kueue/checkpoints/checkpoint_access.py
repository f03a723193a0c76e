"""Where a task instance's shards checkpoint, and what their pods may touch there (pure).

A Blob SAS on a flat-namespace account can be scoped to an account, a container or one blob -- never to a
prefix. So each task instance (dag, run, task, map index) gets a **container of its own** for its shards'
checkpoints, and its pods get a SAS for that container only: one compromised shard can rewrite its own task
instance's checkpoints, but not another's, and no ledger (ledgers stay in the base container, where pods have
no access at all). Retries of a task instance share its container, so they resume from each other's
checkpoints.

The container is named ``<base head>-<32 hex of sha256(base, prefix, salt)>`` (at most 63 characters, Azure's
limit): the hash covers the FULL base name, so two bases sharing their first 30 characters never share a shard
container. The salt is random, drawn when the task instance's ledger is created and kept in it
(``RunLedger.container_salt``): retries find the container through the ledger, and a container re-created
after its ledger was deleted (a sweep, a user) gets a new name, which no SAS signed for the old one opens
(a container SAS signs its container's name). A ledger written before salts has none: its container keeps
the unsalted name ``sha256(base, prefix)``. The container carries the prefix and the salt in its metadata, so
a sweep can tell which ledger it belongs to, and whether it is still that ledger's.

A Job's pods get their SAS through a Secret named ``<job>-checkpoint-<16 random hex>``, a JobSet's through
``<jobset>-checkpoint-jobset-<16 random hex>`` (``sas_secret_name``): not derivable from the object's public
facts; only its own pod env names it. The owner's kind is in the name because admission binds a Secret to the
one object it is named after, and a Job and a JobSet may share a name (``deploy/policy``
``checkpoint-secret-binding``): with one form for both, a Job named like a JobSet would read the JobSet's.
On account-key auth the SAS carries no rights of its own: it points (``si=``) at a stored access policy of
the shard container with a per-attempt id (``access_policy_id``), which holds its permissions and expiry. So
the operator can refresh it (extend the policy), revoke it (drop the policy) and a re-created container (no
policies) refuses it.

A user-delegation SAS (an Azure identity, e.g. AKS workload identity, no account key) has no stored policy:
it carries its own window and cannot be extended or revoked. So it is short (``RESIGNED_SAS_TTL``, or a
shorter ``credential_ttl``) and the trigger that follows the Job signs a new one every quarter of that and
writes it into the Job's Secret (``CredentialRenewal.resign``); pods read it from the Secret mounted as a
file, which the kubelet refreshes. Every SAS for an https account is https-only (``spr=https``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from .. import kinds
from ..names import CHECKPOINT_SAS_ENV, SAS_MOUNT_DIR, SAS_SECRET_KEY, SAS_VOLUME_NAME
from .ledger import CONTAINER_SALT_HEX, is_container_salt

SHARD_CONTAINER_HASH = 32  # hex characters of sha256(prefix): collisions are out of reach
SHARD_CONTAINER_HEAD = 63 - 1 - SHARD_CONTAINER_HASH
PREFIX_METADATA = "airflowkueueprefix"  # container metadata: the task-instance prefix it serves
SALT_METADATA = "airflowkueuesalt"  # container metadata: the salt of its name (absent: an unsalted name)
SAS_SECRET_INFIX = "-checkpoint-"  # a Job's SAS Secret: <job name>-checkpoint-<kind tag><access id>
ACCESS_ID_HEX = 16  # random hex characters of an attempt's access id (Secret suffix, policy id tail)
ACCESS_POLICY_HEAD = 24  # hex characters of sha256(job name) that start its policies' ids
MAX_ACCESS_POLICIES = 5  # Azure's limit of stored access policies per container
SHARD_SAS_PERMISSIONS = "racwdl"  # read, add, create, write, delete, list: save, load, prune, mark done
CLOCK_SKEW = timedelta(minutes=5)  # a SAS starts this much in the past: the account's clock may be behind
MAX_CREDENTIAL_TTL = timedelta(days=7)  # Azure's limit for a user-delegation key (workload identity)
MIN_RENEWAL_SECONDS = 5.0  # a trigger renews a Job's SAS every quarter of its TTL, never more often than this
DEFAULT_CREDENTIAL_TTL = timedelta(hours=48)
RESIGNED_SAS_TTL = timedelta(hours=1)
"""The longest a user-delegation SAS is signed for: it cannot be revoked, so it is re-signed instead."""
_CONTAINER = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}")


def is_container_name(name: str) -> bool:
    """Azure's rule: 3-63 of ``[a-z0-9-]``, starting and ending with a letter or digit, no ``--``."""
    return bool(_CONTAINER.fullmatch(name))


def shard_container_name(base: str, prefix: str, salt: str | None = None) -> str:
    """The container of one task instance's shard checkpoints (``prefix``: ``ledger.ledger_prefix``;
    ``salt``: its ledger's ``container_salt``, None for a ledger written before salts)."""
    if not is_container_name(base):
        raise ValueError(
            f"container {base!r} is not a valid Blob container name: use 3-63 lowercase letters, digits and "
            "single hyphens, starting and ending with a letter or digit"
        )
    if salt is not None and not is_container_salt(salt):
        raise ValueError(f"salt={salt!r} must be {CONTAINER_SALT_HEX} lowercase hex characters")
    hashed = f"{base}\n{prefix}" if salt is None else f"{base}\n{prefix}\n{salt}"
    digest = hashlib.sha256(hashed.encode()).hexdigest()[:SHARD_CONTAINER_HASH]
    return f"{base[:SHARD_CONTAINER_HEAD].rstrip('-')}-{digest}"


def is_shard_container_of(base: str, name: str, prefix: str, salt: str | None = None) -> bool:
    """Whether ``name`` is the shard container ``base`` makes for ``prefix`` and ``salt`` (both from its
    metadata; no salt: an unsalted container of before salts): another base with the same first 30
    characters, or another salt, makes other names."""
    if not is_container_name(base) or (salt is not None and not is_container_salt(salt)):
        return False
    return name == shard_container_name(base, prefix, salt)


def sas_secret_name(job_name: str, access_id: str, owner_kind: str | None = None) -> str:
    """The Secret that hands the pods of the ``owner_kind`` object named ``job_name`` (a Job by default:
    ``kinds.child_kind``) their SAS (``access_id``: ``ACCESS_ID_HEX`` random hex)."""
    owner_kind = owner_kind or kinds.child_kind().kind
    if not re.fullmatch(rf"[0-9a-f]{{{ACCESS_ID_HEX}}}", access_id):
        raise ValueError(f"access_id={access_id!r} must be {ACCESS_ID_HEX} lowercase hex characters")
    try:
        tag = kinds.describe(owner_kind).secret_tag
    except kinds.UnknownKind as exc:
        raise kinds.UnknownKind(f"owner_kind={owner_kind!r}: {exc}") from None
    return f"{job_name}{SAS_SECRET_INFIX}{tag}{access_id}"


def sas_secret_kind_tags() -> list[str]:
    """Every registered kind's tag (``KindDescription.secret_tag``): between the infix and the access id,
    the owner's kind. A tag is never hex, so no owner's name plus one kind's form is another's plus the
    other's."""
    return [k.secret_tag for k in kinds.kinds()]


def secret_name_of(obj: Mapping[str, Any]) -> str | None:
    """The SAS Secret an object's pods read: the ``secretKeyRef`` of ``CHECKPOINT_SAS_ENV`` anywhere in
    its pod templates (a Job's, or a JobSet's replicated jobs'); None when its pods get no SAS."""
    stack: list[Any] = [obj.get("spec")]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if node.get("name") == CHECKPOINT_SAS_ENV and "valueFrom" in node:
                return str(node["valueFrom"]["secretKeyRef"]["name"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def mount_sas_file(pod_spec: dict[str, Any], secret: str) -> None:
    """Mount the SAS Secret ``secret`` read-only in every container of ``pod_spec`` (replacing a volume or
    mount of the same name or path): the kubelet refreshes a mounted Secret, while an env var is fixed at
    container start, so pods pick up a re-signed SAS as they run."""
    volume = {
        "name": SAS_VOLUME_NAME,
        "secret": {"secretName": secret, "items": [{"key": SAS_SECRET_KEY, "path": SAS_SECRET_KEY}]},
    }
    volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") != SAS_VOLUME_NAME]
    pod_spec["volumes"] = [*volumes, volume]
    mount = {"name": SAS_VOLUME_NAME, "mountPath": SAS_MOUNT_DIR, "readOnly": True}
    for container in pod_spec["containers"]:
        mounts = container.get("volumeMounts") or []
        kept = [m for m in mounts if m.get("name") != SAS_VOLUME_NAME and m.get("mountPath") != SAS_MOUNT_DIR]
        container["volumeMounts"] = [*kept, mount]


def is_finished(obj: Mapping[str, Any]) -> bool:
    """Whether a Job (Complete/Failed) or JobSet (Completed/Failed) has finished: no pod of it starts."""
    return kinds.finished_condition(obj) is not None


def access_policy_head(job_name: str) -> str:
    """The start of every stored access policy id of ``job_name``'s SAS (what a revoke matches)."""
    return hashlib.sha256(job_name.encode()).hexdigest()[:ACCESS_POLICY_HEAD]


def access_policy_id(job_name: str, access_id: str) -> str:
    """One attempt's stored access policy id (40 characters; Azure allows 64)."""
    return access_policy_head(job_name) + access_id


def policies_to_keep(expiries: Mapping[str, datetime | None], now: datetime) -> list[str]:
    """Which existing stored access policies stay when one more is added: the unexpired ones, at most
    ``MAX_ACCESS_POLICIES - 1`` of them (those expiring last: the oldest attempts' go first)."""
    never = datetime.max.replace(tzinfo=now.tzinfo)
    live = sorted((e or never, i) for i, e in expiries.items() if e is None or e > now)
    return sorted(i for _, i in live[max(0, len(live) - (MAX_ACCESS_POLICIES - 1)) :])


def credential_window(now: datetime, ttl: timedelta) -> tuple[datetime, datetime]:
    """(start, expiry) of a pod credential issued at ``now``; ``ttl`` must be within MAX_CREDENTIAL_TTL."""
    if not timedelta(0) < ttl <= MAX_CREDENTIAL_TTL:
        raise ValueError(
            f"credential_ttl={ttl} must be more than 0 and at most {MAX_CREDENTIAL_TTL.days} days "
            "(Azure's limit for a user-delegation SAS): set it to the longest a Job may queue and run"
        )
    return now - CLOCK_SKEW, now + ttl


def signed_sas_ttl(credential_ttl: timedelta, bound_to_policy: bool) -> timedelta:
    """How long one signed SAS is valid: ``credential_ttl`` when a stored policy holds its window (it can be
    extended and revoked), else at most ``RESIGNED_SAS_TTL`` (the trigger re-signs it)."""
    return credential_ttl if bound_to_policy else min(credential_ttl, RESIGNED_SAS_TTL)


@dataclass(frozen=True)
class CredentialRenewal:
    """What a trigger needs to keep a waiting or running Job's SAS valid, every quarter of ``ttl_seconds``:
    a policy-bound one by moving the window of the Job's stored access policies (``policy_head``) on
    ``shard_container`` to now + ``ttl_seconds``; with ``resign`` (a user-delegation SAS) by signing a new
    one for that window and writing it into the Secret ``secret_name`` in ``namespace``, only while it is
    the one owned by the object of uid ``owner_uid``. Crosses the operator/trigger boundary as
    ``to_dict``/``from_dict`` (a dict of an earlier version, without the last four, is policy-bound)."""

    conn_id: str
    container: str
    shard_container: str
    policy_head: str
    ttl_seconds: float
    resign: bool = False
    namespace: str = ""
    secret_name: str = ""
    owner_uid: str = ""

    def __post_init__(self) -> None:
        if self.resign and not (self.namespace and self.secret_name and self.owner_uid):
            raise ValueError("a re-signed SAS needs the namespace, name and owner uid of its Secret")

    @property
    def every_seconds(self) -> float:
        return max(self.ttl_seconds / 4, MIN_RENEWAL_SECONDS)

    def window(self, now: datetime) -> tuple[datetime, datetime]:
        return credential_window(now, timedelta(seconds=self.ttl_seconds))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CredentialRenewal:
        return cls(
            str(data["conn_id"]),
            str(data["container"]),
            str(data["shard_container"]),
            str(data["policy_head"]),
            float(data["ttl_seconds"]),
            bool(data.get("resign", False)),
            str(data.get("namespace") or ""),
            str(data.get("secret_name") or ""),
            str(data.get("owner_uid") or ""),
        )
