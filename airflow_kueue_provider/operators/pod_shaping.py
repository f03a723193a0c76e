"""What a checkpointed Job's pods are told: which shards they run (index ``i`` runs the ``i``-th of them,
or the ``i``-th pack), where to checkpoint, and with which credential (``pod_access``)."""

from __future__ import annotations

from typing import Any

from ..kueue.checkpoints.checkpoint_access import mount_sas_file, secret_name_of
from ..kueue.checkpoints.packing_choice import PackingChoice
from ..kueue.checkpoints.shard_packing import ShardPacks
from ..kueue.index_set import IndexSet
from ..kueue.kinds import child_kind
from ..kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_URL_ENV,
    GRACE_ENV,
    MIN_PARALLELISM_ANNOTATION,
    SHARDS_ENV,
    SHARDS_PER_POD_ENV,
    WORKLOAD_IDENTITY_LABEL,
)
from ..storage.blob_auth import container_url_of
from .checkpoint_place import CheckpointPlace
from .pod_access import PodAccess


class PodShaping:
    """Shapes a Job (or a JobSet's checkpointed Job template) to run exactly the given shards."""

    def __init__(self, place: CheckpointPlace, packing: PackingChoice, access: PodAccess) -> None:
        self.place = place
        self.packing = packing
        self.access = access

    def pod_env(
        self,
        packs: ShardPacks,
        termination_grace: int = 30,
        job_name: str | None = None,
        owner_kind: str | None = None,
    ) -> list[dict[str, Any]]:
        """The env each pod reads: its shards, the checkpoint container and prefix, its flush deadline and
        (with a SAS) where its credential is."""
        place = self.place
        container = place.named(place.salt_to_create())
        url = container_url_of(place.hook.get_auth(), container)
        return [
            {"name": SHARDS_ENV, "value": str(packs.shards)},
            *([{"name": SHARDS_PER_POD_ENV, "value": packs.shape}] if packs.is_packed else []),
            {"name": CHECKPOINT_URL_ENV, "value": url},
            {"name": CHECKPOINT_PREFIX_ENV, "value": place.prefix},
            # The SDK's SIGTERM flush must end before the kubelet's SIGKILL: 5 s short of the pod's grace.
            {"name": GRACE_ENV, "value": str(max(1, termination_grace - 5))},
            *self.access.secret_env(job_name, owner_kind),
        ]

    def shape_job(self, manifest: dict[str, Any], shards: IndexSet) -> dict[str, Any]:
        """Run exactly ``shards`` (completions = their count, or their packs' with several per pod) and tell
        each pod where to checkpoint, with which credential (the Job's SAS Secret, created right after the
        Job: the Job starts suspended; its name gets a new random suffix here)."""
        meta = manifest.get("metadata", {})
        kind = str(manifest.get("kind") or child_kind().kind)
        self.access.shaping(str(meta.get("name") or ""), kind)
        packs = self.packing.packs(shards)
        spec = manifest["spec"]
        spec["completions"] = count = packs.index_count
        spec["parallelism"] = min(int(spec.get("parallelism") or count), count)
        annotations = meta.get("annotations") or {}
        if int(annotations.get(MIN_PARALLELISM_ANNOTATION) or 0) >= spec["parallelism"]:
            del annotations[MIN_PARALLELISM_ANNOTATION]  # so few shards: Kueue admits them all, or none
        if spec.get("maxFailedIndexes") is not None:
            spec["maxFailedIndexes"] = min(int(spec["maxFailedIndexes"]), count)
        pod = spec["template"]
        grace = int(pod["spec"].get("terminationGracePeriodSeconds") or 30)  # Kubernetes' default
        env = self.pod_env(packs, grace, meta.get("name"), kind)
        names = {e["name"] for e in env}
        for container in pod["spec"]["containers"]:
            container["env"] = [e for e in container.get("env") or [] if e["name"] not in names] + env
        if (secret := secret_name_of(manifest)) is not None:
            mount_sas_file(pod["spec"], secret)
        if service_account := self.place.config.workload_identity_service_account:
            pod["spec"]["serviceAccountName"] = service_account
            pod.setdefault("metadata", {}).setdefault("labels", {})[WORKLOAD_IDENTITY_LABEL] = "true"
        return manifest
