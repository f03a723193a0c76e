"""What a checkpointed Job's pods are told: their shards, where to checkpoint, their flush deadline."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.operators.checkpoint_config import Checkpointing
from airflow_kueue_provider.operators.pod_access import PodAccess
from airflow_kueue_provider.operators.pod_shaping import PodShaping

from .blob_fakes import MemoryBlobs, place


def _shaping(config: Checkpointing | None = None, blobs: MemoryBlobs | None = None) -> PodShaping:
    where = place(config=config, shard_count=10, blobs=blobs)
    return PodShaping(where, PackingChoice(), PodAccess(where))


def _job(grace: int | None = None, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "main", "env": env or []}, {"name": "side"}]}
    if grace is not None:
        pod["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": "job-1"}, "spec": {"parallelism": 8, "template": {"spec": pod}}}


def _env(job: dict[str, Any], container: int = 0) -> dict[str, Any]:
    return {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][container]["env"]}


def test_every_container_learns_its_shards_and_the_salted_container_made_for_them() -> None:
    blobs = MemoryBlobs()
    shaping = _shaping(blobs=blobs)
    user = [{"name": "AIRFLOW_KUEUE_SHARDS", "value": "0-99"}, {"name": "MINE", "value": "1"}]

    job = shaping.shape_job(_job(env=user), IndexSet.parse("2,5,8"))

    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (3, 3)
    env = _env(job)
    assert env["AIRFLOW_KUEUE_SHARDS"]["value"] == "2,5,8", "the provider's value, not the user's"
    assert env["MINE"]["value"] == "1" and _env(job, 1).keys() == env.keys() - {"MINE"}
    salt = shaping.place.container_salt
    assert salt is not None and blobs.writes == 1, "the ledger that names the container was made first"
    url = env["AIRFLOW_KUEUE_CHECKPOINT_URL"]["value"]
    assert url == f"https://acct.blob.core.windows.net/{shaping.place.named(salt)}"
    assert env["AIRFLOW_KUEUE_CHECKPOINT_PREFIX"]["value"] == "d/r/t"
    assert "AIRFLOW_KUEUE_SHARDS_PER_POD" not in env, "one shard per pod says nothing"


def test_the_flush_deadline_is_five_seconds_short_of_the_pods_grace_and_at_least_one() -> None:
    shaping = _shaping()
    grace = {
        given: _env(shaping.shape_job(_job(given), IndexSet.range(0, 2)))["AIRFLOW_KUEUE_GRACE_SECONDS"][
            "value"
        ]
        for given in (None, 60, 3)
    }
    assert grace == {None: "25", 60: "55", 3: "1"}


def test_a_sas_pod_reads_and_mounts_the_secret_named_for_its_job() -> None:
    shaping = _shaping()
    job = shaping.shape_job(_job(), IndexSet.range(0, 2))
    env = _env(job)
    secret = env["AIRFLOW_KUEUE_CHECKPOINT_SAS"]["valueFrom"]["secretKeyRef"]["name"]
    assert secret == shaping.access.sas_secret_name("job-1")
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert [v["secret"]["secretName"] for v in volumes if "secret" in v] == [secret]


def test_a_workload_identity_pod_gets_its_service_account_and_no_secret() -> None:
    config = Checkpointing("blob", "ckpt", workload_identity_service_account="sa")
    job = _shaping(config).shape_job(_job(), IndexSet.range(0, 2))
    pod = job["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "sa" and "volumes" not in pod["spec"]
    assert pod["metadata"]["labels"] == {"azure.workload.identity/use": "true"}
    assert "AIRFLOW_KUEUE_CHECKPOINT_SAS" not in _env(job)
