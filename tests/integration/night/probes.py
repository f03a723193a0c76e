"""What a night measures besides the cluster's own records, each in a thread of its own and bounded:

- ``UiReader``: the Kueue tab's data route and page and the queue page, read at a steady rate as people
  would during the peak (bearer JWT, as the browser's cookie carries it), each latency kept;
- ``ProcessSampler``: CPU seconds and RSS of each Airflow component's process tree (psutil, every second);
- ``ApiserverCounter``: kube-apiserver's ``/metrics``: every request of every client, and the requests of
  Airflow's own identity through its FlowSchema;
- ``QuotaSampler``: each ClusterQueue's used quota against its nominal quota, every two seconds;
- ``SpotEvictions``: a Spot node taken away at the night's rate, the way AKS does (taint, evict its pods
  through the Eviction API with their grace, delete the Node), and a new one after the replacement delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx


@dataclass
class UiRead:
    at: float
    route: str
    status: int
    seconds: float


class UiReader(threading.Thread):
    """Reads ``targets()`` (paths, chosen afresh each round) ``per_second`` times a second until stopped."""

    def __init__(self, base_url: str, token: Any, targets: Any, per_second: float = 2.0) -> None:
        super().__init__(name="night-ui", daemon=True)
        self.base_url, self.token, self.targets, self.per_second = base_url, token, targets, per_second
        self.reads: list[UiRead] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        client = httpx.Client(timeout=30)
        i = 0
        while not self.stop_event.is_set():
            paths = self.targets()
            if paths:
                path = paths[i % len(paths)]
                i += 1
                started = time.perf_counter()
                try:
                    status = client.get(
                        f"{self.base_url}{path}", headers={"Authorization": f"Bearer {self.token()}"}
                    ).status_code
                except httpx.HTTPError:
                    status = 0
                self.reads.append(
                    UiRead(time.time(), path.split("?")[0], status, time.perf_counter() - started)
                )
            self.stop_event.wait(1.0 / self.per_second)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=40)


def ui_paths(dag_id: str, run_id: str, task_ids: list[str], map_index: int) -> list[str]:
    run = quote(run_id, safe="")
    paths = ["/kueue/queues", "/kueue/api/queues"]
    for task in task_ids:
        q = f"dag_id={dag_id}&run_id={run}&task_id={quote(task, safe='')}&map_index={map_index}"
        paths += [f"/kueue/task?{q}", f"/kueue/api/task?{q}"]
    return paths


@dataclass
class ProcessSample:
    at: float
    cpu_seconds: dict[str, float]
    rss_mb: dict[str, float]


class ProcessSampler(threading.Thread):
    """Every ``interval`` s: per component (name -> root pid, re-read each time: a killed triggerer comes
    back under another pid), CPU seconds (user+system, the tree's live processes plus what exited before:
    the first sample of a pid is the base) and RSS of the tree."""

    def __init__(self, roots: Any, interval: float = 1.0) -> None:
        super().__init__(name="night-procs", daemon=True)
        self.roots, self.interval = roots, interval
        self.samples: list[ProcessSample] = []
        self.stop_event = threading.Event()
        self._seen: dict[int, float] = {}  # pid -> its last cpu seconds
        self._gone: dict[str, float] = {}  # component -> cpu seconds of its exited processes
        self._owner: dict[int, str] = {}

    def run(self) -> None:
        import psutil

        while not self.stop_event.is_set():
            cpu: dict[str, float] = {}
            rss: dict[str, float] = {}
            alive: set[int] = set()
            for name, pid in self.roots().items():
                try:
                    root = psutil.Process(pid)
                    procs = [root, *root.children(recursive=True)]
                except psutil.Error:
                    continue
                for p in procs:
                    try:
                        t = p.cpu_times()
                        mem = p.memory_info().rss
                    except psutil.Error:
                        continue
                    alive.add(p.pid)
                    self._seen[p.pid] = t.user + t.system
                    self._owner[p.pid] = name
                    cpu[name] = cpu.get(name, 0.0) + t.user + t.system
                    rss[name] = rss.get(name, 0.0) + mem / 2**20
            for pid in [p for p in self._seen if p not in alive]:
                owner = self._owner.pop(pid)
                self._gone[owner] = self._gone.get(owner, 0.0) + self._seen.pop(pid)
            for name, gone in self._gone.items():
                cpu[name] = cpu.get(name, 0.0) + gone
            self.samples.append(ProcessSample(time.time(), cpu, rss))
            self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


@dataclass
class ApiserverCount:
    at: float
    total: int  # apiserver_request_total, every client
    airflow: int  # dispatched requests of Airflow's FlowSchema (workers, triggerers)
    by_verb_resource: dict[str, int] = field(default_factory=dict)
    ui: int = 0  # dispatched requests of the UI's FlowSchema (the API server's Kueue pages)
    airflow_by: dict[str, int] = field(default_factory=dict)  # "<resource>.<verb>" or "other" -> requests


class ApiserverCounter:
    def __init__(self, url: str, pki: Path, flow_schema: str, ui_flow_schema: str = "") -> None:
        self.url, self.flow_schema, self.ui_flow_schema = url, flow_schema, ui_flow_schema
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))

    def scrape(self) -> ApiserverCount:
        with urllib.request.urlopen(self.url, context=self.ctx, timeout=60) as resp:
            text = resp.read().decode()
        total = airflow = ui = 0
        by: dict[str, int] = {}
        airflow_by: dict[str, int] = {}
        for line in text.splitlines():
            if line.startswith("apiserver_request_total{"):
                labels, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
                n = int(float(value))
                total += n
                pairs = dict(p.split("=", 1) for p in labels.split('",') if "=" in p)
                key = f"{pairs.get('resource', '').strip(chr(34))} {pairs.get('verb', '').strip(chr(34))}"
                by[key] = by.get(key, 0) + n
            elif line.startswith("apiserver_flowcontrol_dispatched_requests_total{"):
                found = re.search(r'flow_schema="([^"]*)"', line)
                schema = found.group(1) if found else ""
                n = int(float(line.rsplit(" ", 1)[1]))
                if schema == self.flow_schema or schema.startswith(f"{self.flow_schema}--"):
                    airflow += n
                    part = schema[len(self.flow_schema) + 2 :] or "other"
                    airflow_by[part] = airflow_by.get(part, 0) + n
                elif self.ui_flow_schema and schema == self.ui_flow_schema:
                    ui += n
        return ApiserverCount(time.time(), total, airflow, by, ui, airflow_by)


@dataclass
class QuotaSample:
    at: float
    used: dict[str, float]  # ClusterQueue -> CPUs in use (every flavor)
    nominal: dict[str, float]


class QuotaSampler(threading.Thread):
    def __init__(self, cluster: Any, cluster_queues: list[str], interval: float = 2.0) -> None:
        super().__init__(name="night-quota", daemon=True)
        self.cluster, self.cqs, self.interval = cluster, cluster_queues, interval
        self.samples: list[QuotaSample] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        from airflow_kueue_provider.kueue.quantity import parse_quantity

        while not self.stop_event.is_set():
            used: dict[str, float] = {}
            nominal: dict[str, float] = {}
            for cq in self.cqs:
                try:
                    obj = self.cluster.kueue_get("clusterqueues", cq)
                except Exception:
                    continue
                used[cq] = sum(
                    float(parse_quantity(r["total"]))
                    for f in (obj.get("status") or {}).get("flavorsUsage") or []
                    for r in f.get("resources") or []
                    if r["name"] == "cpu"
                )
                nominal[cq] = sum(
                    float(parse_quantity(r["nominalQuota"]))
                    for g in obj["spec"]["resourceGroups"]
                    for f in g["flavors"]
                    for r in f["resources"]
                    if r["name"] == "cpu"
                )
            self.samples.append(QuotaSample(time.time(), used, nominal))
            self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


@dataclass
class Eviction:
    at: float
    node: str
    pods: int
    back: float | None = None
    error: str = ""
    pod: str = ""  # a pod evicted alone (PodEvictions); empty when its whole node went


class SpotEvictions(threading.Thread):
    """Every ``interval`` seconds on average (exponential gaps, seeded), one Spot node that runs pods is
    taken away as AKS does; ``replacement`` seconds later it joins again (the pool scaling back)."""

    def __init__(
        self, cluster: Any, nodes: list[str], interval: float, replacement: float, seed: int, log: Path
    ) -> None:
        super().__init__(name="night-spot", daemon=True)
        from ..soak.faults import SpotNodeLoss

        self.cluster, self.nodes, self.interval, self.replacement = (
            cluster,
            list(nodes),
            interval,
            replacement,
        )
        self.rng = random.Random(seed)
        self.loss = SpotNodeLoss(cluster.core, log)
        self.evictions: list[Eviction] = []
        self.stop_event = threading.Event()
        self._down: dict[str, float] = {}

    def run(self) -> None:
        next_at = time.time() + self.rng.expovariate(1.0 / self.interval)
        while not self.stop_event.is_set():
            now = time.time()
            for node, at in list(self._down.items()):
                if now >= at:
                    self._heal(node)
            if now >= next_at:
                self._evict()
                next_at = now + self.rng.expovariate(1.0 / self.interval)
            self.stop_event.wait(0.5)
        for node in list(self._down):
            self._heal(node)

    def _evict(self) -> None:
        up = [n for n in self.nodes if n not in self._down]
        busy = []
        for n in up:
            pods = self.cluster.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={n}").items
            if any(p.status.phase == "Running" for p in pods):
                busy.append((n, len(pods)))
        if not busy:
            return
        node, pods = self.rng.choice(sorted(busy))
        record = Eviction(time.time(), node, pods)
        try:
            self.loss.kill(node)
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"[:200]
        self.evictions.append(record)
        self._down[node] = time.time() + self.replacement

    def _heal(self, node: str) -> None:
        try:
            self.loss.heal(node)
        except Exception as exc:
            for e in self.evictions:
                if e.node == node and e.back is None:
                    e.error = f"heal: {type(exc).__name__}: {exc}"[:200]
        for e in self.evictions:
            if e.node == node and e.back is None:
                e.back = time.time()
        self._down.pop(node, None)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=60)


class BlobRequestCounter:
    """A loopback proxy in front of Azurite that stamps every HTTP request it passes on (a request line at
    the start of a client's stream or right after the previous request's bytes): the Blob requests of the
    processes whose connection string points at it."""

    REQUEST = re.compile(rb"(?:^|\r\n)(?:GET|PUT|POST|DELETE|HEAD|PATCH|OPTIONS) /[^ \r\n]* HTTP/1\.[01]\r\n")

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.stamps: list[float] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="night-blob", daemon=True)

    def start(self) -> BlobRequestCounter:
        self._thread.start()
        self._ready.wait(10)
        return self

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, count: bool) -> None:
            tail = b""
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if count:
                        window = tail + data
                        self.stamps.extend([time.time()] * len(self.REQUEST.findall(window)))
                        cut = window.rfind(b"\r\n")  # keep the unfinished line: it may be a request's
                        tail = window[cut:] if cut >= 0 else window[-512:]
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))

    def connection_string(self, original: str) -> str:
        """``original`` with its BlobEndpoint through this proxy."""
        return re.sub(r"BlobEndpoint=http://[^/;]+/", f"BlobEndpoint=http://127.0.0.1:{self.port}/", original)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


class PodEvictions(threading.Thread):
    """Every ``interval`` seconds, one of ``slots`` pod slots (the quota's CPUs) reclaimed: the pod running
    in it, if any, evicted through the Eviction API (its grace period, DisruptionTarget). A slot, not a
    running pod, is drawn, so a Job's last pod is not hit at every draw (it was, drawing among the running
    ones: the tail's one pod evicted every 3 s, again and again)."""

    def __init__(
        self, cluster: Any, namespaces: list[str], interval: float, seed: int, slots: int,
        before_evict: Callable[[str, str, str], None] | None = None,
    ) -> None:  # fmt: skip
        """``before_evict(uid, namespace, name)``: told first (the bed's done records decide whether the pod
        waits in its grace for its released shards, ``DoneRecords.before_eviction``)."""
        super().__init__(name="night-pod-evictions", daemon=True)
        self.cluster, self.namespaces, self.interval, self.slots = cluster, list(namespaces), interval, slots
        self.before_evict = before_evict
        self.rng = random.Random(seed)
        self.evictions: list[Eviction] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        from kubernetes.client.rest import ApiException

        while not self.stop_event.wait(self.interval):
            running = [
                p
                for ns in self.namespaces
                for p in self.cluster.core.list_namespaced_pod(
                    ns, field_selector="status.phase=Running"
                ).items
            ]
            slot = self.rng.randrange(max(self.slots, len(running)))
            if slot >= len(running):
                continue  # an idle slot: nothing to evict
            pod = sorted(running, key=lambda p: p.metadata.name)[slot]
            if self.before_evict is not None:
                self.before_evict(pod.metadata.uid, pod.metadata.namespace, pod.metadata.name)
            record = Eviction(time.time(), pod.spec.node_name or "", 1, pod=pod.metadata.name)
            body = {"metadata": {"name": pod.metadata.name, "namespace": pod.metadata.namespace}}
            try:
                self.cluster.core.create_namespaced_pod_eviction(
                    pod.metadata.name, pod.metadata.namespace, body
                )
            except ApiException as exc:
                record.error = f"{exc.status}: {exc.reason}"
            self.evictions.append(record)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)
