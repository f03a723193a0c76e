#!/usr/bin/env python
"""API requests and detection latency: our ``KueueJobTrigger`` against the cncf ``KubernetesJobTrigger``.

On the local cluster, in one run, three phases (baseline with no triggers, ours, cncf), each in a fresh
namespace + ResourceFlavor + ClusterQueue + LocalQueue (the integration tests' helpers):

1. the triggers' identity: a ServiceAccount, a kubeconfig with its token behind ``kubernetes_default``
   (``AIRFLOW_CONN_KUBERNETES_DEFAULT``), and APF FlowSchemas that match only that ServiceAccount;
2. a reference watch on the Jobs (own thread, loop and client) stamping each Job's first ``Complete=True``;
3. ``/metrics`` of kube-apiserver and of Kueue's visibility server (window start);
4. N single-index Indexed Jobs running ``--run-seconds``, then N triggers rebuilt from ``serialize()`` and
   run in this process's one event loop as the triggerer's ``run_trigger`` runs them;
5. once every trigger has fired and ``--window`` seconds have passed, ``/metrics`` again (window end).

Method and limits: benchmarks/README.md.  Try: ``--jobs 10 --run-seconds 20``; real run: ``--jobs 200``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import platform
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import import_module, metadata
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bed_env import load_devcluster_env  # noqa: E402  (triggerer_load uses it as tr.load_devcluster_env)

MANAGED_BY = {"app.kubernetes.io/managed-by": "airflow-kueue-provider"}
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=airflow-kueue-provider"
CONN_ID = "kubernetes_default"
IMPLS = {
    "ours": "airflow_kueue_provider.triggers.kueue_job.KueueJobTrigger",
    "cncf": "airflow.providers.cncf.kubernetes.triggers.job.KubernetesJobTrigger",
}
READ_VERBS = {"GET", "LIST", "WATCH"}
TARGET_PER_JOB_HOUR = 2.0
TARGET_P99_MS = 250.0

log = logging.getLogger("benchmarks.trigger_requests")


# --------------------------------------------------------------------------------------------------------
# Cluster environment
# --------------------------------------------------------------------------------------------------------
def ensure_cluster() -> None:
    """``devcluster status``; if it is not healthy, ``devcluster up`` (idempotent). Never ``down``."""
    status = subprocess.run(
        [sys.executable, "-m", "devcluster", "status"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if status.returncode != 0:
        log.warning("devcluster status exited %s; running devcluster up", status.returncode)
        subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, check=True)


# --------------------------------------------------------------------------------------------------------
# Server-side counts: /metrics of kube-apiserver (jobs, workloads) and of Kueue's visibility server
# (pendingworkloads is an aggregated API: kube-apiserver proxies it and does not count it itself)
# --------------------------------------------------------------------------------------------------------
_LABELS = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"


@dataclass
class Scrape:
    at: float
    requests: Counter[str]  # "resource[/subresource] VERB" -> count (2xx and others together)
    non_2xx: Counter[str]  # "resource[/subresource] VERB code" -> count
    watches_open: Counter[str]  # apiserver_longrunning_requests WATCH, by resource
    errors: list[str]
    attributed: Counter[str] = field(default_factory=Counter)  # the triggers' identity only (APF)


class Metrics:
    def __init__(self, apiserver_url: str, visibility_url: str | None, pki: Path) -> None:
        self.apiserver_url = apiserver_url
        self.visibility_url = visibility_url
        self._apiserver_ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self._apiserver_ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        # Kueue's visibility server has a self-signed serving certificate
        self._visibility_ctx = ssl.create_default_context()
        self._visibility_ctx.check_hostname = False
        self._visibility_ctx.verify_mode = ssl.CERT_NONE
        self._visibility_ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    @staticmethod
    def _fetch(url: str, ctx: ssl.SSLContext) -> str:
        with urllib.request.urlopen(url, context=ctx, timeout=30) as resp:
            return str(resp.read().decode())

    def scrape(self, flow_schemas: dict[str, str] | None = None) -> Scrape:
        out = Scrape(time.perf_counter(), Counter(), Counter(), Counter(), [])
        text = self._fetch(self.apiserver_url, self._apiserver_ctx)
        prefixes = ("apiserver_request_total{", "apiserver_longrunning_requests{", _DISPATCHED + "{")
        for name, labels, value in _samples(text, prefixes):
            if name == _DISPATCHED:
                if flow_schemas and (key := flow_schemas.get(labels.get("flow_schema", ""))):
                    out.attributed[key] += int(value)
                continue
            resource, sub, verb = labels.get("resource", ""), labels.get("subresource", ""), labels["verb"]
            if labels.get("group") not in ("batch", "kueue.x-k8s.io") or resource not in (
                "jobs",
                "workloads",
            ):
                continue
            if name == "apiserver_longrunning_requests":
                if verb == "WATCH":
                    out.watches_open[resource] += int(value)
                continue
            if verb in READ_VERBS and sub in ("", "status"):
                _add(out, f"{resource}/{sub}" if sub else resource, verb, labels.get("code", ""), value)
        if self.visibility_url:
            try:
                text = self._fetch(self.visibility_url, self._visibility_ctx)
                for _, labels, value in _samples(text, ("apiserver_request_total{",)):
                    if labels.get("subresource") == "pendingworkloads" and labels["verb"] in READ_VERBS:
                        _add(out, "pendingworkloads", labels["verb"], labels.get("code", ""), value)
            except OSError as exc:
                out.errors.append(f"visibility /metrics unavailable: {exc}")
        return out


def _samples(text: str, prefixes: tuple[str, ...]) -> Iterable[tuple[str, dict[str, str], float]]:
    for line in text.splitlines():
        if line.startswith(prefixes):
            head, _, value = line.rpartition(" ")
            name, _, labels = head.partition("{")
            yield name, dict(_LABELS.findall(labels)), float(value)


def _add(out: Scrape, resource: str, verb: str, code: str, value: float) -> None:
    out.requests[f"{resource} {verb}"] += int(value)
    if not code.startswith("2"):
        out.non_2xx[f"{resource} {verb} {code}"] += int(value)


def _delta(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    keys = set(after) | set(before)
    return {k: after[k] - before[k] for k in sorted(keys) if after[k] - before[k]}


# --------------------------------------------------------------------------------------------------------
# Client-side counts: every request the triggers' kubernetes_asyncio clients send from the main thread
# (a cross-check that is immune to other clients of the cluster; it also sees discovery and TLS setups)
# --------------------------------------------------------------------------------------------------------
class ClientCounter:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.clients = 0
        self.client_sites: Counter[str] = Counter()  # where each new API client (connection pool) was made

    def reset(self) -> None:
        self.requests, self.clients, self.client_sites = Counter(), 0, Counter()

    def install(self) -> None:
        from kubernetes_asyncio.client import rest

        counter, cls = self, rest.RESTClientObject
        orig_request, orig_init = cls.request, cls.__init__

        async def request(
            self: Any, method: str, url: str, query_params: Any = None, *a: Any, **kw: Any
        ) -> Any:
            if threading.current_thread() is threading.main_thread():
                counter.requests[_classify(method, url, query_params)] += 1
            return await orig_request(self, method, url, query_params, *a, **kw)

        def init(self: Any, *a: Any, **kw: Any) -> None:
            if threading.current_thread() is threading.main_thread():
                counter.clients += 1
                counter.client_sites[_call_site()] += 1
            orig_init(self, *a, **kw)

        cls.request = request  # type: ignore[method-assign]
        cls.__init__ = init  # type: ignore[method-assign]


def _call_site() -> str:
    """The innermost trigger/hook frame (ours or the cncf provider's) that created an API client."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = frame.filename.replace(os.sep, "/")
        for root in ("airflow_kueue_provider/", "airflow/providers/cncf/kubernetes/"):
            if root in path and not path.endswith(("hooks/kubernetes.py", "kube_client.py")):
                return f"{root}{path.split(root, 1)[1]}:{frame.lineno} {frame.name}"
    return "elsewhere"


def _classify(method: str, url: str, query_params: Any) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update({str(k): str(v) for k, v in (query_params or [])})
    segs = [s for s in parts.path.split("/") if s]
    if "namespaces" in segs and len(segs) > segs.index("namespaces") + 2:
        i = segs.index("namespaces")
        rest = segs[i + 2 :]  # resource[, name[, subresource]]
        if rest[-1] == "pendingworkloads":
            return f"pendingworkloads {method}"
        resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
        if method == "GET" and len(rest) == 1:
            method = "WATCH" if query.get("watch") in ("True", "true", "1") else "LIST"
        return f"{resource} {method}"
    return f"{'/'.join(segs) or '/'} {method} (other)"


# --------------------------------------------------------------------------------------------------------
# Reference watch: its own thread, event loop and client (not counted client-side), stamps completions
# --------------------------------------------------------------------------------------------------------
class ReferenceWatch:
    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.complete: dict[str, tuple[float, float]] = {}  # job -> (perf_counter, wall clock)
        self.failed: dict[str, tuple[float, float]] = {}
        self.errors: list[str] = []
        self.synced = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._main, name=f"reference-watch-{namespace}", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self.synced.wait(60):
            raise RuntimeError(f"reference watch of {self.namespace} did not sync: {self.errors}")

    def stop(self) -> None:
        if self._loop and self._task:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(30)

    def finished(self) -> int:
        return len(set(self.complete) | set(self.failed))

    def _main(self) -> None:
        self._loop = asyncio.new_event_loop()
        with suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._watch())
        self._loop.close()

    def _observe(self, obj: dict[str, Any]) -> None:
        now = (time.perf_counter(), time.time())
        name = obj["metadata"]["name"]
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("status") != "True":
                continue
            if cond.get("type") == "Complete":
                self.complete.setdefault(name, now)
            elif cond.get("type") == "Failed":
                self.failed.setdefault(name, now)

    async def _watch(self) -> None:
        from kubernetes_asyncio import client, config, watch
        from kubernetes_asyncio.client.rest import ApiException

        self._task = asyncio.current_task()
        cfg = client.Configuration()
        await config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        async with client.ApiClient(cfg) as api:
            batch = client.BatchV1Api(api)
            while True:
                resp = await batch.list_namespaced_job(
                    self.namespace, label_selector=MANAGED_BY_SELECTOR, _preload_content=False
                )
                doc = json.loads(await resp.read())  # type: ignore[attr-defined]
                for item in doc.get("items") or []:
                    self._observe(item)
                version = doc["metadata"]["resourceVersion"]
                self.synced.set()
                try:
                    while True:
                        stream = watch.Watch(return_type="object")
                        async for event in stream.stream(
                            batch.list_namespaced_job,
                            self.namespace,
                            label_selector=MANAGED_BY_SELECTOR,
                            resource_version=version,
                            allow_watch_bookmarks=True,
                            timeout_seconds=3600,
                            _request_timeout=3700,
                        ):
                            obj = event["raw_object"]
                            version = obj.get("metadata", {}).get("resourceVersion", version)
                            if event["type"] in ("ADDED", "MODIFIED"):
                                self._observe(obj)
                except ApiException as exc:
                    if exc.status != 410:
                        self.errors.append(repr(exc))
                        await asyncio.sleep(1)


# --------------------------------------------------------------------------------------------------------
# The triggers' own identity: a ServiceAccount in the phase's namespace, a kubeconfig with its token behind
# the `kubernetes_default` connection, and one APF FlowSchema per (resource, verb) matching only that
# ServiceAccount, so `apiserver_flowcontrol_dispatched_requests_total{flow_schema=...}` counts the triggers'
# requests server-side and nothing else (other users of the cluster, the controllers, this harness).
# --------------------------------------------------------------------------------------------------------
SA_NAME = "bench-triggerer"
ATTRIBUTED_RULES: list[tuple[str, str, list[str], list[str]]] = [
    ("jobs GET", "batch", ["jobs"], ["get"]),
    ("jobs LIST", "batch", ["jobs"], ["list"]),
    ("jobs WATCH", "batch", ["jobs"], ["watch"]),
    ("jobs/status GET", "batch", ["jobs/status"], ["get"]),
    ("workloads GET", "kueue.x-k8s.io", ["workloads"], ["get"]),
    ("workloads LIST", "kueue.x-k8s.io", ["workloads"], ["list"]),
    ("workloads WATCH", "kueue.x-k8s.io", ["workloads"], ["watch"]),
    ("workloads/status GET", "kueue.x-k8s.io", ["workloads/status"], ["get"]),
    (
        "pendingworkloads GET",
        "visibility.kueue.x-k8s.io",
        ["localqueues/pendingworkloads", "clusterqueues/pendingworkloads"],
        ["get", "list"],
    ),
]
OTHER = "other (discovery, writes, …)"


@dataclass
class Identity:
    kubeconfig: Path
    flow_schemas: dict[str, str]  # FlowSchema name -> "resource VERB"
    conn_before: str | None


def setup_identity(cluster: Any, namespace: str, tmpdir: Path) -> Identity:
    import yaml
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(cluster.api)
    cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": SA_NAME}})
    read = ["get", "list", "watch"]
    rules = [
        {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": [*read, "delete"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": read},
        {
            "apiGroups": ["visibility.kueue.x-k8s.io"],
            "resources": ["localqueues/pendingworkloads"],
            "verbs": ["get", "list"],
        },
        {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": read},
    ]  # fmt: skip
    rbac.create_namespaced_role(namespace, {"metadata": {"name": SA_NAME}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": SA_NAME},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SA_NAME},
            "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": namespace}],
        },
    )
    token = cluster.core.create_namespaced_service_account_token(
        SA_NAME, namespace, {"spec": {"expirationSeconds": 4 * 3600}}
    ).status.token
    admin = yaml.safe_load(Path(os.environ["KUBECONFIG"]).read_text())
    cluster_entry = admin["clusters"][0]["cluster"]
    kubeconfig = tmpdir / f"{namespace}.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "devcluster", "cluster": cluster_entry}],
                "users": [{"name": SA_NAME, "user": {"token": token}}],
                "contexts": [{"name": "bench", "context": {"cluster": "devcluster", "user": SA_NAME}}],
                "current-context": "bench",
            }
        )
    )
    kubeconfig.chmod(0o600)
    subject = {"kind": "ServiceAccount", "serviceAccount": {"name": SA_NAME, "namespace": namespace}}
    flow = client.FlowcontrolApiserverV1Api(cluster.api)
    prefix = f"bench-{namespace}"[:200]
    schemas: dict[str, str] = {}
    specs = [
        (key, 50, [{"verbs": verbs, "apiGroups": [group], "resources": res, "namespaces": ["*"],
                    "clusterScope": True}], None)
        for key, group, res, verbs in ATTRIBUTED_RULES
    ] + [
        (OTHER, 51, [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"],
                      "clusterScope": True}], [{"verbs": ["*"], "nonResourceURLs": ["*"]}])
    ]  # fmt: skip
    for i, (key, precedence, resource_rules, non_resource_rules) in enumerate(specs):
        name = f"{prefix}-{i:02d}"
        rule: dict[str, Any] = {"subjects": [subject], "resourceRules": resource_rules}
        if non_resource_rules:
            rule["nonResourceRules"] = non_resource_rules
        flow.create_flow_schema(
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "FlowSchema",
                "metadata": {"name": name, "labels": {"devcluster/test": "true"}},
                "spec": {
                    "matchingPrecedence": precedence,
                    "priorityLevelConfiguration": {"name": "exempt"},  # as unthrottled as the admin cert
                    "rules": [rule],
                },
            }
        )
        schemas[name] = key
    conn_before = os.environ.get("AIRFLOW_CONN_KUBERNETES_DEFAULT")
    os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
    )
    return Identity(kubeconfig, schemas, conn_before)


def probe_identity(identity: Identity, namespace: str, metrics: Metrics) -> None:
    """One GET as the ServiceAccount until RBAC answers 404 (not 403) and the FlowSchema has counted it."""
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    api = config.new_client_from_config(config_file=str(identity.kubeconfig))
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                client.BatchV1Api(api).read_namespaced_job("probe-does-not-exist", namespace)
            except ApiException as exc:
                if exc.status == 404 and metrics.scrape(identity.flow_schemas).attributed["jobs GET"] > 0:
                    return
            time.sleep(0.5)
    finally:
        api.close()
    raise RuntimeError(f"the benchmark identity in {namespace} never got through RBAC/APF")


def teardown_identity(cluster: Any, identity: Identity | None) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    if identity is None:
        return
    if identity.conn_before is None:
        os.environ.pop("AIRFLOW_CONN_KUBERNETES_DEFAULT", None)
    else:
        os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = identity.conn_before
    flow = client.FlowcontrolApiserverV1Api(cluster.api)
    for name in identity.flow_schemas:
        try:
            flow.delete_flow_schema(name)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("could not delete FlowSchema %s: %s", name, exc)
    with suppress(OSError):
        identity.kubeconfig.unlink()


# --------------------------------------------------------------------------------------------------------
# Triggers, run as the triggerer's run_trigger runs them
# --------------------------------------------------------------------------------------------------------
@dataclass
class TriggerRecord:
    job: str
    started_perf: float = 0.0
    started_wall: float = 0.0
    event_perf: float | None = None
    event_wall: float | None = None
    events: int = 0
    status: str | None = None
    message: str | None = None
    error: str | None = None
    reference_perf: float | None = None
    reference_wall: float | None = None
    latency_ms: float | None = None


def build_trigger(impl: str, job: str, namespace: str, queue: str, poll_interval: float) -> Any:
    """Construct, serialize, and rebuild from the serialized form (what the triggerer receives)."""
    module, _, name = IMPLS[impl].rpartition(".")
    cls = getattr(import_module(module), name)
    if impl == "ours":
        trigger = cls(job_name=job, namespace=namespace, queue_name=queue, kubernetes_conn_id=CONN_ID)
    else:
        trigger = cls(
            job_name=job,
            job_namespace=namespace,
            pod_names=[],
            pod_namespace=namespace,
            base_container_name="shard",
            kubernetes_conn_id=CONN_ID,
            poll_interval=poll_interval,
            get_logs=False,
            do_xcom_push=False,
        )
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    return getattr(import_module(module), name)(**kwargs)


async def run_trigger(trigger: Any, rec: TriggerRecord) -> None:
    rec.started_perf, rec.started_wall = time.perf_counter(), time.time()
    try:
        async for event in trigger.run():
            if rec.event_perf is None:
                rec.event_perf, rec.event_wall = time.perf_counter(), time.time()
                payload = event.payload if isinstance(event.payload, dict) else {"status": str(event.payload)}
                rec.status = str(payload.get("status"))
                rec.message = str(payload.get("message"))[:300]
            rec.events += 1
    except asyncio.CancelledError:
        rec.error = rec.error or "cancelled (no event before the deadline)"
        raise
    except Exception as exc:
        rec.error = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        with suppress(Exception):
            await trigger.cleanup()


# --------------------------------------------------------------------------------------------------------
# One phase: baseline (no triggers), ours, or cncf
# --------------------------------------------------------------------------------------------------------
@dataclass
class PhaseResult:
    impl: str
    namespace: str
    jobs: int
    window_s: float
    create_s: float
    server: dict[str, int]  # apiserver_request_total deltas, every client of the cluster
    server_non_2xx: dict[str, int]
    attributed: dict[str, int] | None  # the triggers' identity only
    watches_open_mid: dict[str, int]
    watches_open_end: dict[str, int]
    client: dict[str, int] = field(default_factory=dict)
    client_sessions: int = 0
    client_sites: dict[str, int] = field(default_factory=dict)
    records: list[TriggerRecord] = field(default_factory=list)
    reference_complete: int = 0
    reference_failed: int = 0
    reference_errors: list[str] = field(default_factory=list)
    concurrent_namespaces: list[str] = field(default_factory=list)
    scrape_errors: list[str] = field(default_factory=list)
    log_warnings: dict[str, int] = field(default_factory=dict)
    overran: bool = False


def other_test_namespaces(cluster: Any, mine: str) -> list[str]:
    items = cluster.core.list_namespace(label_selector="devcluster/test=true").items
    return sorted(ns.metadata.name for ns in items if ns.metadata.name != mine)


def wait_namespace_gone(cluster: Any, namespace: str, timeout: float = 600) -> bool:
    from kubernetes.client.rest import ApiException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            cluster.core.read_namespace(namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        time.sleep(1)
    return False


def mark(text: str) -> None:
    """A line in the captured stdout (the log file) that splits it by phase."""
    print(f"=== {text} ===", flush=True)


async def run_phase(
    impl: str, args: argparse.Namespace, cluster: Any, metrics: Metrics, counter: ClientCounter, tmpdir: Path
) -> PhaseResult:
    from tests.integration.cluster import create_kueue_env, delete_kueue_env, indexed_job

    n, cpu_m, mem_mi = args.jobs, args.cpu_millis, 64
    env = create_kueue_env(
        cluster, f"bench-{impl}", cpu=f"{n * cpu_m + 1000}m", memory=f"{n * mem_mi + 1024}Mi"
    )
    progress(f"[{impl}] namespace {env.namespace}: {n} Jobs x {args.run_seconds}s, window {args.window:.0f}s")
    ref = ReferenceWatch(os.environ["KUBECONFIG"], env.namespace)
    identity: Identity | None = None
    tasks: list[asyncio.Task[None]] = []
    try:
        if args.identity == "serviceaccount":
            identity = setup_identity(cluster, env.namespace, tmpdir)
            await asyncio.to_thread(probe_identity, identity, env.namespace, metrics)
        schemas = identity.flow_schemas if identity else None
        ref.start()
        await asyncio.sleep(2)
        concurrent = other_test_namespaces(cluster, env.namespace)
        counter.reset()
        before = await asyncio.to_thread(metrics.scrape, schemas)
        t0 = before.at
        mark(f"phase {impl} window start")

        names = [f"bench-{i:04d}" for i in range(n)]

        def create(name: str) -> None:
            env.create_job(
                indexed_job(
                    name,
                    env.local_queue,
                    completions=1,
                    cpu=f"{cpu_m}m",
                    memory=f"{mem_mi}Mi",
                    run_duration=f"{args.run_seconds}s",
                    labels=MANAGED_BY,
                )
            )

        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(args.create_threads) as pool:
            await asyncio.gather(*(loop.run_in_executor(pool, create, x) for x in names))
        create_s = time.perf_counter() - t0

        records = [TriggerRecord(name) for name in names]
        if impl != "baseline":
            triggers = [
                build_trigger(impl, x, env.namespace, env.local_queue, args.poll_interval) for x in names
            ]
            tasks = [
                asyncio.create_task(run_trigger(t, r), name=f"{impl}-{r.job}")
                for t, r in zip(triggers, records, strict=True)
            ]
        started = time.perf_counter()

        # open watches while the Jobs run (the gauge), halfway through the run
        await asyncio.sleep(max(0.0, args.run_seconds / 2))
        mid = await asyncio.to_thread(metrics.scrape, schemas)

        deadline = t0 + args.window + args.grace
        while time.perf_counter() < deadline:
            if all(t.done() for t in tasks) and ref.finished() >= n:
                break
            await asyncio.sleep(0.25)
        pending = [t for t in tasks if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            progress(f"[{impl}] {len(pending)} triggers had no event by the deadline")
        triggers_s = time.perf_counter() - started
        # watches are counted by apiserver_request_total when they close: leave time for that; fill the window
        await asyncio.sleep(max(3.0, t0 + args.window - time.perf_counter()))
        after = await asyncio.to_thread(metrics.scrape, schemas)
        mark(f"phase {impl} window end")
        window_s = after.at - t0
        progress(
            f"[{impl}] window {window_s:.1f}s (Jobs created in {create_s:.1f}s, triggers ran "
            f"{triggers_s:.1f}s); reference saw {len(ref.complete)} Complete, {len(ref.failed)} Failed"
        )

        for r in records:
            seen = ref.complete.get(r.job) or ref.failed.get(r.job)
            if seen:
                r.reference_perf, r.reference_wall = seen
                if r.event_perf is not None:
                    r.latency_ms = (r.event_perf - seen[0]) * 1000.0
        return PhaseResult(
            impl=impl,
            namespace=env.namespace,
            jobs=n,
            window_s=window_s,
            create_s=create_s,
            server=_delta(after.requests, before.requests),
            server_non_2xx=_delta(after.non_2xx, before.non_2xx),
            attributed=_delta(after.attributed, before.attributed) if identity else None,
            watches_open_mid=_delta(mid.watches_open, before.watches_open),
            watches_open_end=_delta(after.watches_open, before.watches_open),
            client=dict(sorted(counter.requests.items())),
            client_sessions=counter.clients,
            client_sites=dict(counter.client_sites.most_common()),
            records=records if impl != "baseline" else [],
            reference_complete=len(ref.complete),
            reference_failed=len(ref.failed),
            reference_errors=ref.errors,
            concurrent_namespaces=concurrent,
            scrape_errors=before.errors + mid.errors + after.errors,
            overran=window_s > args.window + 5,
        )
    finally:
        for t in tasks:
            t.cancel()
        with suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
        ref.stop()
        teardown_identity(cluster, identity)
        delete_kueue_env(env)
        if not await asyncio.to_thread(wait_namespace_gone, cluster, env.namespace):
            progress(f"namespace {env.namespace} still terminating after 600 s")


# --------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def _reads(counts: dict[str, int] | None) -> int:
    return sum(v for k, v in (counts or {}).items() if k != OTHER)


def summarize(phase: PhaseResult, baseline: PhaseResult | None) -> dict[str, Any]:
    recs = phase.records
    deferred = [r.event_perf - r.started_perf for r in recs if r.event_perf is not None]
    job_hours = sum(deferred) / 3600.0
    lat = [r.latency_ms for r in recs if r.latency_ms is not None]
    global_net = _reads(phase.server) - (_reads(baseline.server) if baseline else 0)
    attributed = _reads(phase.attributed) if phase.attributed is not None else None
    requests = attributed if attributed is not None else global_net
    return {
        "impl": phase.impl,
        "jobs": phase.jobs,
        "mean_deferred_s": (sum(deferred) / len(deferred)) if deferred else None,
        "job_hours": job_hours,
        "window_s": phase.window_s,
        "requests": requests,
        "per_job_hour": (requests / job_hours) if job_hours else None,
        "attributed": attributed,
        "attributed_other": (phase.attributed or {}).get(OTHER),
        "global_total": _reads(phase.server),
        "global_baseline": _reads(baseline.server) if baseline else None,
        "global_net": global_net,
        "global_net_per_job_hour": (global_net / job_hours) if job_hours else None,
        "client_total": sum(phase.client.values()),
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "max_ms": max(lat) if lat else None,
        "min_ms": min(lat) if lat else None,
        "events_ok": sum(1 for r in recs if r.status == "success"),
        "events": sum(1 for r in recs if r.event_perf is not None),
        "latencies": len(lat),
    }


def _f(v: float | None, fmt: str = "{:.0f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _kv(d: dict[str, int] | None, signed: bool = False) -> str:
    if d is None:
        return "n/a"
    return ", ".join(f"{k} {v:+d}" if signed else f"{k} {v}" for k, v in d.items()) or (
        "0" if signed else "—"
    )


def render(
    phases: dict[str, PhaseResult], args: argparse.Namespace, versions: dict[str, str], wall_s: float
) -> str:
    baseline = phases.get("baseline")
    rows = {k: summarize(p, baseline) for k, p in phases.items() if k != "baseline"}
    label = {"ours": "ours: `KueueJobTrigger` (shared watch)", "cncf": "cncf: `KubernetesJobTrigger` (poll)"}
    attributed = args.identity == "serviceaccount"
    lines = [
        f"# Trigger requests benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"N = {args.jobs} single-index Jobs per implementation, each running {args.run_seconds} s, all "
        f"admitted at once; cncf `poll_interval` = {args.poll_interval:g} s; all triggers in one asyncio "
        f"loop; window {args.window:.0f} s per phase; benchmark wall time {wall_s / 60:.1f} min.",
        "",
        "| implementation | jobs | run length (mean deferred / window) | requests | requests per job-hour "
        "| detection p50 | p99 | max | events ok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k, s in rows.items():
        lines.append(
            f"| {label.get(k, k)} | {s['jobs']} | {_f(s['mean_deferred_s'], '{:.1f}')} s / "
            f"{s['window_s']:.0f} s | {s['requests']} | {_f(s['per_job_hour'], '{:.2f}')} "
            f"| {_f(s['p50_ms'])} ms | {_f(s['p99_ms'])} ms | {_f(s['max_ms'])} ms "
            f"| {s['events_ok']}/{s['jobs']} |"
        )
    if "ours" in rows and "cncf" in rows:
        o, c = rows["ours"], rows["cncf"]

        def ratio(key: str) -> str:
            if not o[key] or c[key] is None or o[key] <= 0:
                return "n/a"
            return f"{c[key] / o[key]:.1f}x"

        lines += [
            "",
            f"Ratios cncf / ours: requests {ratio('requests')}, requests per job-hour "
            f"{ratio('per_job_hour')}, detection p50 {ratio('p50_ms')}, p99 {ratio('p99_ms')}, "
            f"max {ratio('max_ms')}.",
        ]
    if "ours" in rows:
        o = rows["ours"]
        ok_req = o["per_job_hour"] is not None and o["per_job_hour"] <= TARGET_PER_JOB_HOUR
        ok_lat = o["p99_ms"] is not None and o["p99_ms"] <= TARGET_P99_MS
        lines += [
            "",
            f"Targets for ours: <= {TARGET_PER_JOB_HOUR:g} requests per job-hour: "
            f"{_f(o['per_job_hour'], '{:.2f}')}, {'met' if ok_req else 'NOT met'}; detection p99 <= "
            f"{TARGET_P99_MS:.0f} ms: {_f(o['p99_ms'])} ms, {'met' if ok_lat else 'NOT met'}.",
        ]
    how = (
        "server-side `apiserver_flowcontrol_dispatched_requests_total` of FlowSchemas that match only the "
        "triggers' ServiceAccount"
        if attributed
        else "server-side `apiserver_request_total` deltas minus the baseline window"
    )
    lines += [
        "",
        f"Requests = GET/LIST/WATCH on jobs, jobs/status, workloads, workloads/status and pendingworkloads, "
        f"counted as {how}. Per job-hour = requests / sum of the time each trigger was deferred "
        "(start to event). Detection = trigger event minus the first sighting of `Complete=True` by a "
        "separate reference watch. Method: benchmarks/README.md.",
        "",
        "| implementation | triggers' identity (APF) | other requests by it "
        "| global `apiserver_request_total` (phase - baseline) | per job-hour | client-side count |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for k, s in rows.items():
        lines.append(
            f"| {k} | {_f(s['attributed'])} | {_f(s['attributed_other'])} | {s['global_total']} - "
            f"{_f(s['global_baseline'])} = {s['global_net']} | {_f(s['global_net_per_job_hour'], '{:.1f}')} "
            f"| {s['client_total']} |"
        )
    lines += [
        "",
        "## Breakdown",
        "",
        "| phase | triggers' identity (APF) | global `apiserver_request_total` Δ | global non-2xx Δ "
        "| open watches Δ mid-run / end | client-side | new API clients |",
        "|---|---|---|---|---|---|---:|",
    ]
    for k, p in phases.items():
        lines.append(
            f"| {k} | {_kv(p.attributed)} | {_kv(p.server)} | {_kv(p.server_non_2xx)} "
            f"| {_kv(p.watches_open_mid, True)} / {_kv(p.watches_open_end, True)} | {_kv(p.client)} "
            f"| {p.client_sessions} |"
        )
    odd: list[str] = []
    for k, p in phases.items():
        bad = [r for r in p.records if r.error or (r.status and r.status != "success") or r.events > 1]
        for r in bad[:5]:
            odd.append(f"{k} {r.job}: events={r.events} status={r.status} error={r.error} msg={r.message}")
        if len(bad) > 5:
            odd.append(f"{k}: {len(bad)} triggers in all with an error, a non-success event or >1 event")
        if p.records and (missing := [r.job for r in p.records if r.event_perf and r.reference_perf is None]):
            odd.append(f"{k}: {len(missing)} events for Jobs the reference never saw finish: {missing[:5]}")
        if p.reference_errors:
            odd.append(f"{k}: reference watch errors {p.reference_errors[:3]}")
        if p.concurrent_namespaces:
            odd.append(
                f"{k}: {len(p.concurrent_namespaces)} other test namespaces existed at the window start "
                f"(their traffic is in the global counts): {', '.join(p.concurrent_namespaces[:4])}"
            )
        if p.scrape_errors:
            odd.append(f"{k}: {'; '.join(p.scrape_errors)}")
        if p.overran:
            odd.append(f"{k}: window overran to {p.window_s:.0f} s (not every trigger fired in time)")
        summary = summarize(p, baseline) if k != "baseline" else None
        if summary and summary["min_ms"] is not None and s["min_ms"] < 0:
            odd.append(
                f"{k}: earliest event {summary['min_ms']:.0f} ms before the reference watch saw Complete"
            )
        if p.client_sites:
            odd.append(f"{k}: new API clients (one TLS connection pool each) made at: {_kv(p.client_sites)}")
        for msg, count in list(p.log_warnings.items())[:8]:
            odd.append(f"{k}: logged {count}x: {msg}")
    lines += ["", "## Observations", ""] + ([f"- {x}" for x in odd] or ["- nothing unusual recorded"])
    lines += ["", "## Versions", ""] + [f"- {k}: {v}" for k, v in versions.items()]
    return "\n".join(lines) + "\n"


def source_provenance() -> str:
    """The provider code this process imported: git HEAD, uncommitted changes, trigger file hashes."""
    import hashlib

    def git(*cmd: str) -> str:
        res = subprocess.run(["git", *cmd], cwd=REPO, capture_output=True, text=True, check=False)
        return res.stdout.strip()

    files = [
        "airflow_kueue_provider/triggers/kueue_follow.py",
        "airflow_kueue_provider/triggers/kueue_job.py",
        "airflow_kueue_provider/watch/namespace_watch.py",
        "airflow_kueue_provider/watch/cache.py",
        "airflow_kueue_provider/watch/following.py",
        "airflow_kueue_provider/hooks/async_client.py",
        "airflow_kueue_provider/hooks/async_jobs.py",
    ]
    hashes = ", ".join(
        f"{Path(f).name} {hashlib.sha256((REPO / f).read_bytes()).hexdigest()[:12]}"
        for f in files
        if (REPO / f).exists()
    )
    dirty = git("status", "--porcelain", "--", "airflow_kueue_provider").splitlines()
    return (
        f"git {git('rev-parse', '--short', 'HEAD')}"
        + (f" + {len(dirty)} uncommitted path(s) under airflow_kueue_provider/" if dirty else "")
        + f"; sha256 as imported: {hashes}"
    )


def versions_info(cluster: Any) -> dict[str, str]:
    from kubernetes import client

    out = {}
    for dist in (
        "apache-airflow",
        "apache-airflow-providers-cncf-kubernetes",
        "airflow-kueue-provider",
        "kubernetes_asyncio",
    ):
        with suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    with suppress(Exception):
        out["kube-apiserver"] = client.VersionApi(cluster.api).get_code().git_version
    pins = REPO / "devcluster" / "versions.env"
    if pins.exists():
        for line in pins.read_text().splitlines():
            if line.startswith(("KUEUE_VERSION=", "KWOK_VERSION=")):
                key, _, value = line.partition("=")
                out[key.split("_")[0].lower()] = value
    out["airflow_kueue_provider source"] = source_provenance()
    out["python"] = platform.python_version()
    out["machine"] = f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}"
    return out


def log_warnings_by_phase(path: Path) -> dict[str, Counter[str]]:
    """WARNING/ERROR lines of the captured log (Airflow's structlog output), by the phase they fell in."""
    phase, out = "setup", dict[str, Counter[str]]()
    level = re.compile(r"\[(warning|error|critical)\s*\]\s*(.*)", re.IGNORECASE)
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("=== phase "):
            phase = line.split()[2]
            continue
        if (m := level.search(line)) and "benchmarks.trigger_requests" not in line:
            msg = re.sub(r"\b(bench-\d+|t-bench-[\w-]+|\d+(\.\d+)?)\b", "…", m.group(2))[:180]
            out.setdefault(phase, Counter())[f"{m.group(1).upper()} {msg}"] += 1
    return out


# --------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=200, help="Jobs (and triggers) per implementation")
    p.add_argument("--run-seconds", type=int, default=90, help="how long each Job's pod runs")
    p.add_argument("--window", type=float, default=None, help="measurement window (default run + 60 s)")
    p.add_argument("--grace", type=float, default=120.0, help="how long past the window triggers may take")
    p.add_argument("--poll-interval", type=float, default=10.0, help="cncf trigger poll_interval")
    p.add_argument("--impls", default="ours,cncf", help="comma list of: ours, cncf (baseline always runs)")
    p.add_argument(
        "--identity",
        choices=("serviceaccount", "admin"),
        default="serviceaccount",
        help="what kubernetes_default authenticates as: a per-phase ServiceAccount (requests attributed "
        "server-side through APF FlowSchemas) or the devcluster admin (global counts only)",
    )
    p.add_argument("--cpu-millis", type=int, default=100, help="CPU request per Job, millicores")
    p.add_argument("--create-threads", type=int, default=8)
    p.add_argument("--apiserver-metrics", default="https://127.0.0.1:26443/metrics")
    p.add_argument("--visibility-metrics", default="https://127.0.0.1:8082/metrics")
    p.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results")
    p.add_argument("--name", default="trigger_requests", help="base name of the result files")
    args = p.parse_args(argv)
    if args.window is None:
        args.window = args.run_seconds + 60.0
    args.impls = [x.strip() for x in args.impls.split(",") if x.strip()]
    unknown = set(args.impls) - set(IMPLS)
    if unknown:
        p.error(f"unknown implementations: {unknown}")
    return args


_console = sys.stderr


def progress(msg: str) -> None:
    line = f"{datetime.now():%H:%M:%S} {msg}"
    print(line, file=_console, flush=True)
    print(line, flush=True)  # into the log as well


async def amain(args: argparse.Namespace) -> int:
    from kubernetes import config

    from tests.integration.cluster import Cluster

    # import both triggers (and Airflow's settings and logging) before any clock starts
    for impl in IMPLS:
        module, _, name = IMPLS[impl].rpartition(".")
        getattr(import_module(module), name)
    counter = ClientCounter()
    counter.install()
    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    state = Path(os.environ.get("DEVCLUSTER_STATE", REPO / ".devcluster"))
    metrics = Metrics(args.apiserver_metrics, args.visibility_metrics, state / "pki")
    versions = versions_info(cluster)
    started = time.perf_counter()
    phases: dict[str, PhaseResult] = {}
    with tempfile.TemporaryDirectory(prefix="bench-trigger-requests-") as tmp:
        for impl in ["baseline", *args.impls]:
            phases[impl] = await run_phase(impl, args, cluster, metrics, counter, Path(tmp))
    wall_s = time.perf_counter() - started
    progress(f"all phases done in {wall_s / 60:.1f} min")
    args._wall_s = wall_s
    args._versions = versions
    args._phases = phases
    return 0


def main(argv: list[str] | None = None) -> int:
    global _console
    args = parse_args(argv)
    load_devcluster_env()
    ensure_cluster()
    args.results.mkdir(parents=True, exist_ok=True)
    log_path = args.results / f"{args.name}.log"
    # Airflow logs (structlog and stdlib alike) to stdout; send fd 1 to the log file for the run
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    _console = os.fdopen(os.dup(2), "w")
    with open(log_path, "w") as log_file:
        os.dup2(log_file.fileno(), 1)
        try:
            rc = asyncio.run(amain(args))
        finally:
            sys.stdout.flush()
            os.dup2(saved_stdout, 1)
            os.close(saved_stdout)
    phases: dict[str, PhaseResult] = args._phases
    for phase, seen in log_warnings_by_phase(log_path).items():
        if phase in phases:
            phases[phase].log_warnings = dict(seen.most_common())
    report = render(phases, args, args._versions, args._wall_s)
    (args.results / f"{args.name}.md").write_text(report)
    raw = {
        "args": {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if not k.startswith("_")
        },
        "versions": args._versions,
        "wall_s": args._wall_s,
        "summary": {k: summarize(p, phases.get("baseline")) for k, p in phases.items() if k != "baseline"},
        "phases": {k: asdict(p) for k, p in phases.items()},
    }
    (args.results / f"{args.name}.json").write_text(json.dumps(raw, indent=1, default=str))
    print(report)
    print(
        f"written: {args.results / (args.name + '.md')}, {args.results / (args.name + '.json')}, {log_path}"
    )
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
