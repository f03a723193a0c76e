"""``up``, ``down`` and ``status`` for the local cluster, as numbered steps."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shlex
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from . import manifests, procs
from .components import (
    JOBSET_CONFIG,
    KUEUE_CONFIG,
    KWOK_CONFIG,
    components,
    process_node_count,
    process_node_name,
)
from .layout import DEVCLUSTER_SRC, REPO, Layout, azurite_connection_string, write_atomically
from .pki import JOBSET_WEBHOOK_CERT, ensure_pki, write_kubeconfig

# Seconds a running but unhealthy component gets before `up` replaces it: long enough that a component only
# slow to answer on a loaded machine is never killed, far shorter than the 120 s a stuck start used to wait.
UNHEALTHY_GRACE = 30.0
RESTARTABLE = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kueue",
    "kwok",
    "jobset",
    "azurite",
    *(f"procnode-{n}" for n in range(process_node_count())),
)
DEFAULT_SPOT_NODES = 4
DEFAULT_SYSTEM_NODES = 1


def say(msg: str) -> None:
    print(f"[devcluster {time.strftime('%H:%M:%S')}] {msg}", flush=True)


@contextmanager
def locked(layout: Layout) -> Iterator[None]:
    layout.state.mkdir(parents=True, exist_ok=True)
    with open(layout.state / "lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


KUEUE_VERSION_ENV = "DEVCLUSTER_KUEUE_VERSION"
"""Another Kueue release than versions.env pins (``v0.15.2``): built by build_kueue.sh in a module of its own,
with the pinned bed's other binaries (the oldest-Kueue lane: ``make test-oldest-kueue``)."""


def build_binaries() -> Path:
    """Run build.sh (a no-op when the cache has this pin set) and return the binary directory; with
    ``DEVCLUSTER_KUEUE_VERSION``, the overlay directory build_kueue.sh makes with that Kueue."""
    out = subprocess.run(
        ["bash", str(DEVCLUSTER_SRC / "build.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    bin_dir = out.stdout.strip().splitlines()[-1]
    if version := os.environ.get(KUEUE_VERSION_ENV, "").strip():
        out = subprocess.run(
            ["bash", str(DEVCLUSTER_SRC / "build_kueue.sh"), bin_dir, version],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        bin_dir = out.stdout.strip().splitlines()[-1]
    return Path(bin_dir)


def build_procnode() -> Path:
    """Run build_procnode.sh (a no-op when the cache has these procnode sources) and return the binary."""
    out = subprocess.run(
        ["bash", str(DEVCLUSTER_SRC / "build_procnode.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


def start_process_nodes(layout: Layout, kubectl: Kubectl, procnode: Path) -> None:
    """Start the process nodes (a procnode rebuilt from changed sources replaces the running one) and wait
    until their Nodes are Ready."""
    count = process_node_count()
    for comp in components(Path(), layout, procnode):
        if not comp.name.startswith("procnode-"):
            continue
        pid = procs.running_pid(layout, comp.name)  # checked against the executable it was started with
        pid_file = layout.pids / f"{comp.name}.pid"
        if pid is not None and pid_file.read_text().partition("\n")[2].strip() != comp.executable:
            say(f"{comp.name} (pid {pid}) runs an older build: replacing it")
            procs.stop(layout, comp.name)
        _start_and_wait(comp, layout)
    for n in range(count):
        kubectl("wait", "--for=condition=Ready", f"node/{process_node_name(n)}", "--timeout=60s")
    if count:
        say(f"{layout.name}: {count} process nodes ready")


def source_dir(bin_dir: Path) -> Path:
    return bin_dir.parent.parent / "src" / bin_dir.name


def install_azurite() -> None:
    if (DEVCLUSTER_SRC / "node_modules" / ".bin" / "azurite-blob").exists():
        return
    say("npm ci (Azurite)")
    subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=DEVCLUSTER_SRC, check=True
    )


class Kubectl:
    def __init__(self, bin_dir: Path, layout: Layout) -> None:
        self.base = [str(bin_dir / "kubectl"), f"--kubeconfig={layout.kubeconfig}"]

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        res = subprocess.run([*self.base, *args], input=stdin, capture_output=True, text=True)
        if check and res.returncode != 0:
            raise RuntimeError(f"kubectl {shlex.join(args)} failed: {res.stderr.strip()}")
        return res.stdout

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=devcluster",
            "-f",
            "-",
            stdin=yaml.safe_dump_all(docs),
        )


def _admin_tls(layout: Layout) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(layout.pki / "ca.crt"))
    ctx.load_cert_chain(str(layout.pki / "admin.crt"), str(layout.pki / "admin.key"))
    return ctx


def _insecure_tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _healthy(comp: procs.Component, layout: Layout) -> bool:
    url = comp.health_url
    if url.startswith("tcp://"):
        host, port = url[len("tcp://") :].split(":")
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return True
        except OSError:
            return False
    ctx = None
    if url.startswith("https://"):
        ctx = _admin_tls(layout) if f":{layout.ports.apiserver}/" in url else _insecure_tls()
    return procs.http_ok(url, ctx)


PORT_FREE_WAIT = 60.0


def _start_and_wait(comp: procs.Component, layout: Layout, timeout: float = 120) -> None:
    """Start ``comp`` (or reuse it when it runs and is healthy) and wait until it is healthy.

    A recorded process that lives but stays unhealthy (e.g. an apiserver still shutting down after SIGTERM,
    which takes longer than 5 s) is stopped, then a fresh one is started."""
    pid = procs.running_pid(layout, comp.name, comp.executable)
    if pid is not None and not _healthy(comp, layout):
        try:
            procs.wait_until(f"{comp.name} (pid {pid})", lambda: _healthy(comp, layout), UNHEALTHY_GRACE)
        except TimeoutError:
            say(f"{comp.name} (pid {pid}) runs but is not healthy: stopping it and starting a new one")
            procs.stop(layout, comp.name)
    port = urlsplit(comp.health_url).port
    ours = procs.running_pid(layout, comp.name, comp.executable) or procs.find_running(comp)
    if port is not None and ours is None:  # a killed apiserver's big heap takes seconds to free: its port too
        free = port
        procs.wait_until(f"port {port} free for {comp.name}", lambda: procs.port_free(free), PORT_FREE_WAIT)
    pid = procs.start(layout, comp)
    procs.wait_until(
        f"{comp.name} (pid {pid})", lambda: _healthy(comp, layout), timeout, layout.logs / f"{comp.name}.log"
    )


def _webhooks_have_ca(kubectl: Kubectl) -> bool:
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        name = f"kueue-{'mutating' if kind.startswith('m') else 'validating'}-webhook-configuration"
        conf = json.loads(kubectl("get", kind, name, "-o", "json", check=False) or "{}")
        if not conf.get("webhooks") or not all(h["clientConfig"].get("caBundle") for h in conf["webhooks"]):
            return False
    return True


def _mount_webhook_certs(kubectl: Kubectl, cert_dir: Path) -> bool:
    """Do what the kubelet's secret volume does in a cluster: copy Kueue's webhook Secret into its cert dir.

    Kueue's cert rotator writes the Secret, then waits for the files to appear in ``webhook.certDir``.
    """
    out = kubectl(
        "get",
        "secret",
        "-n",
        manifests.KUEUE_NAMESPACE,
        "kueue-webhook-server-cert",
        "-o",
        "json",
        check=False,
    )
    data = json.loads(out).get("data") or {} if out else {}
    if not all(k in data for k in ("tls.crt", "tls.key", "ca.crt")):
        return False
    cert_dir.mkdir(parents=True, exist_ok=True)
    for key in ("tls.crt", "tls.key", "ca.crt"):
        content = base64.b64decode(data[key])
        target = cert_dir / key
        if not target.exists() or target.read_bytes() != content:
            tmp = target.with_suffix(".tmp")
            tmp.write_bytes(content)
            tmp.chmod(0o600)
            tmp.replace(target)
    return True


def _kueue_suspends_jobs(kubectl: Kubectl) -> bool:
    """A server-side dry run of a queue-labelled Job comes back suspended: Kueue's webhook answers."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "devcluster-webhook-probe",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "probe"},
        },
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }
        },
    }
    out = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(job), check=False)
    try:
        return bool(json.loads(out)["spec"].get("suspend"))
    except (ValueError, KeyError):
        return False


def _write_jobset_files(layout: Layout) -> None:
    """The JobSet controller's config and its webhook certificate (signed by the bed's CA); a change restarts
    it."""
    cert_dir = layout.jobset / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    changed = _write_if_changed(
        layout.jobset / JOBSET_CONFIG, manifests.jobset_config(cert_dir, layout.ports)
    )
    for source, target in (
        (f"{JOBSET_WEBHOOK_CERT}.crt", "tls.crt"),
        (f"{JOBSET_WEBHOOK_CERT}.key", "tls.key"),
    ):
        content = (layout.pki / source).read_bytes()
        if not (cert_dir / target).exists() or (cert_dir / target).read_bytes() != content:
            changed |= (cert_dir / target).exists()
            write_atomically(cert_dir / target, content.decode(), mode=0o600)
    if changed:
        procs.stop(layout, "jobset")


def _write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path``; True when it had other content before (whoever read it then is stale)."""
    existed = path.exists()
    return write_atomically(path, text) and existed


def write_env(layout: Layout) -> None:
    airflow_conn = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(layout.kubeconfig)}}
    )
    lines = {
        "KUBECONFIG": str(layout.kubeconfig),
        "AZURE_STORAGE_CONNECTION_STRING": azurite_connection_string(layout.ports.azurite_blob),
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": airflow_conn,
        "DEVCLUSTER_STATE": str(layout.state),
    }
    write_atomically(layout.env_file, "".join(f"export {k}={shlex.quote(v)}\n" for k, v in lines.items()))


def up(layout: Layout) -> None:
    started = time.monotonic()
    with locked(layout):
        # 1. Binaries (built once per pin set, cached outside the repo) and Azurite from npm.
        layout.make_dirs()
        bin_dir = build_binaries()
        install_azurite()
        # 2.-5. The control plane, Kueue, KWOK and the fake AKS node pools.
        spot = int(os.environ.get("DEVCLUSTER_SPOT_NODES", DEFAULT_SPOT_NODES))
        system = int(os.environ.get("DEVCLUSTER_SYSTEM_NODES", DEFAULT_SYSTEM_NODES))
        kubectl = bring_up(layout, bin_dir, spot, system)
        # 5b. The process nodes (pods run as local processes; their own module and build key).
        start_process_nodes(layout, kubectl, build_procnode())
        comps = {c.name: c for c in components(bin_dir, layout)}
        # 6. The JobSet controller (its CRD and webhooks were applied before Kueue started), and Azurite.
        _start_and_wait(comps["jobset"], layout)
        _start_and_wait(comps["azurite"], layout)
        # 7. The files users and tests source.
        write_env(layout)
    say(
        f"cluster up in {time.monotonic() - started:.1f}s; source {layout.env_file.relative_to(REPO)}"
        if layout.state.is_relative_to(REPO)
        else f"cluster up; source {layout.env_file}"
    )


def bring_up(layout: Layout, bin_dir: Path, spot: int, system: int) -> Kubectl:
    """One cluster's control plane, Kueue and KWOK nodes (the main cluster, or a MultiKueue worker)."""
    layout.make_dirs()
    # 2. Certificates, kubeconfig and the files the processes read.
    ensure_pki(layout.pki)
    write_kubeconfig(layout.pki, layout.kubeconfig, layout.ports.apiserver)
    # A component whose configuration changed since it started is restarted with the new one.
    visibility = manifests.has_visibility_server_config(source_dir(bin_dir) / "kueue")
    if _write_if_changed(
        layout.kueue / KUEUE_CONFIG,
        manifests.kueue_config(
            layout.kueue / "webhook-certs",
            layout.ports,
            manifests.kueue_feature_gates(os.environ.get(manifests.KUEUE_FEATURE_GATES_ENV)),
            visibility,
        ),
    ):
        procs.stop(layout, "kueue")
    if _write_if_changed(layout.kwok / KWOK_CONFIG, manifests.kwok_stages()):
        procs.stop(layout, "kwok")
    if not layout.is_worker:
        _write_jobset_files(layout)
    comps = {c.name: c for c in components(bin_dir, layout)}
    kubectl = Kubectl(bin_dir, layout)
    # 3. The control plane.
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        _start_and_wait(comps[name], layout)
    say(f"{layout.name}: control plane ready")
    # 4. JobSet's CRD and webhooks first (Kueue sets up its JobSet integration at start only when the CRD is
    #    served; a worker gets the CRD alone), then Kueue: CRDs, rewired webhooks and Services, the
    #    controller; wait for its CA injection.
    ca_bundle = base64.b64encode((layout.pki / "ca.crt").read_bytes()).decode()
    jobset_src = source_dir(bin_dir) / "jobset"
    kubectl.apply(
        manifests.jobset_install(
            Path(kubectl.base[0]), jobset_src, ca_bundle, layout.ports, api_only=layout.is_worker
        )
    )
    kueue_api = manifests.kueue_api_mode(os.environ.get(manifests.KUEUE_API_ENV))
    kubectl.apply(
        manifests.kueue_install(
            Path(kubectl.base[0]), source_dir(bin_dir) / "kueue", layout.ports, kueue_api, visibility
        )
    )
    for resource, stale in manifests.kueue_stale_objects(kueue_api):
        kubectl("delete", resource, stale, "--ignore-not-found")
    kubectl(
        "wait", "--for=condition=Established", "crd", "-l", "app.kubernetes.io/name=kueue", "--timeout=60s"
    )
    cert_dir = layout.kueue / "webhook-certs"
    kueue_log = layout.logs / "kueue.log"
    _mount_webhook_certs(kubectl, cert_dir)
    procs.start(layout, comps["kueue"])
    procs.wait_until("Kueue webhook Secret", lambda: _mount_webhook_certs(kubectl, cert_dir), 60, kueue_log)
    _start_and_wait(comps["kueue"], layout)
    procs.wait_until("Kueue webhook CA injection", lambda: _webhooks_have_ca(kubectl), 90, kueue_log)
    procs.wait_until("Kueue mutating webhook", lambda: _kueue_suspends_jobs(kubectl), 60, kueue_log)
    if visibility:
        apiservice = "apiservice/v1beta2.visibility.kueue.x-k8s.io"
        kubectl("wait", "--for=condition=Available", apiservice, "--timeout=60s")
    say(f"{layout.name}: kueue ready (webhooks{', visibility API' if visibility else ''})")
    # 5. KWOK and the fake AKS node pools.
    _start_and_wait(comps["kwok"], layout)
    kubectl.apply(manifests.pool_nodes(spot, system))
    kubectl("wait", "--for=condition=Ready", "node", "-l", "type=kwok", "--timeout=60s")
    kubectl.apply([manifests.topology()])  # for topology-aware ResourceFlavors (Kueue TAS)
    say(f"{layout.name}: {spot} spot + {system} system fake nodes ready")
    return kubectl


WORKER_PROCESSES = ("kueue", "kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")


def stop_workers(layout: Layout) -> None:
    """Stop the MultiKueue workers started from ``layout``; their state stays, ``multikueue up`` reuses it."""
    for worker in layout.workers():
        for name in WORKER_PROCESSES:
            if (pid := procs.stop(worker, name)) is not None:
                say(f"{worker.name}: stopped {name} (pid {pid})")


def down(layout: Layout) -> None:
    stop_workers(layout)  # MultiKueue workers first, while their manager still runs
    names = [
        *sorted(p.stem for p in layout.pids.glob("procnode-*.pid")),
        "azurite",
        "jobset",
        "kueue",
        "kwok",
        "kube-scheduler",
        "kube-controller-manager",
        "kube-apiserver",
        "etcd",
    ]
    for name in names:
        pid = procs.stop(layout, name)
        if pid is not None:
            say(f"stopped {name} (pid {pid})")
    say("cluster down")


def crash(layout: Layout, name: str) -> int | None:
    """SIGKILL one component's process group, as a crash would (no graceful shutdown); returns its pid."""
    if name not in RESTARTABLE:
        raise ValueError(f"unknown component {name!r}; one of {', '.join(RESTARTABLE)}")
    return procs.stop(layout, name, grace=0.0)


def start_one(layout: Layout, name: str) -> None:
    """Start one crashed component again and wait until it is healthy, without the rest of ``up`` (no
    manifests, no webhook waits): what a supervisor does, in seconds (the fault soak heals this way)."""
    procnode = build_procnode() if name.startswith("procnode-") else Path("procnode")
    comps = {c.name: c for c in components(build_binaries(), layout, procnode)}
    if name not in comps:
        raise ValueError(f"unknown component {name!r}; one of {', '.join(comps)}")
    _start_and_wait(comps[name], layout)


def restart(layout: Layout, name: str) -> None:
    """Crash ``name`` and bring the cluster back (``up`` starts only what is missing)."""
    pid = crash(layout, name)
    say(f"crashed {name} (pid {pid})")
    up(layout)


def status(layout: Layout) -> int:
    """Print what runs and where its logs are; exit code 0 only when every component is healthy."""
    healthy_all = True
    total_rss = 0
    print(f"{'component':<33}{'pid':>8}  {'state':<9}{'rss MiB':>9}  endpoint / log")
    # MultiKueue workers are listed while any of their processes runs (a stopped bed keeps their state).
    started_workers = [w for w in layout.workers() if any(procs.running_pid(w, n) for n in WORKER_PROCESSES)]
    for cluster in [layout, *started_workers]:
        prefix = f"{cluster.name}/" if cluster.is_worker else ""
        for comp in components(Path(), cluster):  # argv is not used here, only names and health URLs
            pid = procs.running_pid(cluster, comp.name)
            ok = pid is not None and _healthy(comp, cluster)
            healthy_all &= ok
            rss = procs.process_rss_kib(pid) if pid else 0
            total_rss += rss
            state = "healthy" if ok else ("unhealthy" if pid else "stopped")
            print(f"{prefix + comp.name:<33}{pid or '-':>8}  {state:<9}{rss / 1024:>9.0f}  {comp.health_url}")
            print(f"{'':<61}{cluster.logs / (comp.name + '.log')}")
    print(f"total RSS: {total_rss / 1024:.0f} MiB; kubeconfig: {layout.kubeconfig}; env: {layout.env_file}")
    return 0 if healthy_all else 1


def main(argv: list[str]) -> int:
    layout = Layout.default()
    cmd = argv[0] if argv else "status"
    if cmd == "up":
        up(layout)
        return 0
    if cmd == "down":
        down(layout)
        return 0
    if cmd == "status":
        return status(layout)
    if cmd == "restart" and len(argv) == 2:
        restart(layout, argv[1])
        return 0
    print(
        f"usage: python -m devcluster up|down|status|restart <{'|'.join(RESTARTABLE)}>|multikueue up",
        file=sys.stderr,
    )
    return 2
