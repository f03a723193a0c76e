"""One home for the names the provider, the cluster and the shard containers share: label and annotation
keys, and the pod environment contract (pure; the operators, triggers, UI and the worker SDK import it).
"""

from __future__ import annotations

# --- Kubernetes and Kueue: labels and annotations the provider sets or reads

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
"""Kueue's partial admission: it may start the Job with fewer pods than ``parallelism``, down to this."""
ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
TOPOLOGY_ANNOTATIONS = (REQUIRED_TOPOLOGY_ANNOTATION, PREFERRED_TOPOLOGY_ANNOTATION)
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INDEX_LABEL = INDEX_ANNOTATION
"""Kubernetes >= 1.28 also labels an Indexed Job's pods with their index: one index's pods by selector."""
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
WORKLOAD_IDENTITY_LABEL = "azure.workload.identity/use"

# --- The provider's own: which Jobs are its, whose, and what they record

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "airflow-kueue-provider"
PROVIDER_LABEL_PREFIX = "airflow-kueue.io/"
DAG_ID_LABEL = "airflow-kueue.io/dag-id"
TASK_ID_LABEL = "airflow-kueue.io/task-id"
RUN_ID_LABEL = "airflow-kueue.io/run-id"
TRY_NUMBER_LABEL = "airflow-kueue.io/try-number"
MAP_INDEX_LABEL = "airflow-kueue.io/map-index"
DEADLINE_ANNOTATION = "airflow-kueue.io/deadline"
"""On the Job: the resolved deadline (ISO 8601, UTC), for the UI and ``kubectl``."""
ESCALATIONS_ANNOTATION = "airflow-kueue.io/escalations"
"""On the Job: the escalations taken so far (a JSON list of {step, at, detail, why})."""
SEAL_ANNOTATION = "airflow-kueue.io/seal"
"""On every object the provider creates: an HMAC, under a key only Airflow holds, over its kind, namespace,
name and full identity (``kueue.identity.identity_seal``). Without it, an object with the task's labels is
not its."""
UID_SEAL_ANNOTATION = "airflow-kueue.io/uid-seal"
"""On a Job, patched right after create: an HMAC over the uid the apiserver gave it (a copy has another)."""
FORECAST_RUN_ANNOTATION = "airflow-kueue.io/forecast-run"
"""On a Job's pod template (so Kueue's Workload carries it): ``<seconds>:<HMAC>``, how long the forecast at
submit expects the Job to run once admitted, sealed over its namespace and name. Another task's forecast
reads it, sealed only, for when this Job's quota frees."""

# --- The pod environment contract: what the operator gives each shard container (the worker SDK reads it)

INDEX_ENV = "JOB_COMPLETION_INDEX"
"""Kubernetes' own, in every pod of an Indexed Job: the pod's index."""
SHARDS_ENV = "AIRFLOW_KUEUE_SHARDS"
"""The shard ids the Job runs (an interval string); index ``i`` runs the ``i``-th. Unset: shard id = index."""
SHARDS_PER_POD_ENV = "AIRFLOW_KUEUE_SHARDS_PER_POD"
"""Set for packed Jobs (``ShardPacks.shape``): a number above 1 (index ``i`` runs the ``i``-th group of that
many shard ids of ``SHARDS_ENV``) or decreasing ``size x count`` runs (``5x24,4x5,1x19``); the SDK's
``Shard.each_from_env`` loops over them."""
CHECKPOINT_URL_ENV = "AIRFLOW_KUEUE_CHECKPOINT_URL"
CHECKPOINT_PREFIX_ENV = "AIRFLOW_KUEUE_CHECKPOINT_PREFIX"
GRACE_ENV = "AIRFLOW_KUEUE_GRACE_SECONDS"
"""How long the SDK's SIGTERM flush may take: the pod's grace period less 5 s (the kubelet's SIGKILL)."""
CHECKPOINT_SAS_ENV = "AIRFLOW_KUEUE_CHECKPOINT_SAS"
"""The Job's SAS for its task instance's shard container, from the Job's Secret (key ``SAS_SECRET_KEY``)."""
SAS_SECRET_KEY = "sas-token"
CHECKPOINT_SAS_FILE_ENV = "AIRFLOW_KUEUE_CHECKPOINT_SAS_FILE"
"""The same SAS as a file of the Job's Secret mounted read-only: the kubelet refreshes it (within about a
minute) when the trigger re-signs a short-lived SAS, so the SDK reads it there first (env: old pods)."""
SAS_VOLUME_NAME = "airflow-kueue-checkpoint-sas"
"""The pod volume (a ``secret`` volume of the Job's SAS Secret) that holds that file."""
SAS_MOUNT_DIR = "/var/run/airflow-kueue/checkpoint"
"""Where each shard container mounts it (read-only); the file is ``<dir>/<SAS_SECRET_KEY>``."""
TASK_SOURCE_ENV = "AIRFLOW_KUEUE_TASK_SOURCE"
"""``@task.kueue``: the decorated function's source, base64 (the decorator line removed)."""
TASK_CALL_ENV = "AIRFLOW_KUEUE_TASK_CALL"
"""``@task.kueue``: ``{"function": name, "args": [...], "kwargs": {...}}`` as base64 JSON."""
TASK_RUNNER_MODULE = "airflow_kueue_provider.worker.task_function"
"""What a ``@task.kueue`` pod runs (``python -m``): calls the function once per shard of the pod."""
SHARD_ITEMS_ENV = "AIRFLOW_KUEUE_SHARD_ITEMS"
"""``shard_items=`` as a list: its compact JSON (at most 64 KiB); shard ``i`` reads item ``i``."""
SHARD_ITEMS_BLOB_ENV = "AIRFLOW_KUEUE_SHARD_ITEMS_BLOB"
"""``shard_items=ShardItemsBlob(path)``: the source blob's ``blob://<path>`` (for messages); the pods read
the items the operator staged in chunks under ``<checkpoint prefix>/shards/items/`` of their container."""
