"""Issue 27 item 1: the process nodes run a pod's command as local processes, as a kubelet would.

Each test has a namespace of its own and never deletes a node (the serial test at the end does). What the
programs print is read from their pod directory; the node's journal witnesses signals and exits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from devcluster.layout import MAX_PROCESS_NODES, PORTS

from ..cluster import Cluster, delete_kueue_env, is_true, short_id, wait_for
from ..process_node import (
    PROCESS_NODE_LABEL,
    PROCESS_TOLERATIONS,
    journal,
    pod_dir,
    pod_log,
    process_nodes,
    process_queues,
)

REPO = Path(__file__).resolve().parents[3]
PROCNODE_SRC = REPO / "devcluster" / "procnode"


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    slug = request.node.name.lower().replace("_", "-")[:30].strip("-")
    name = f"t-{slug}-{short_id()}"
    cluster.core.create_namespace({"metadata": {"name": name, "labels": {"devcluster/test": "true"}}})
    yield name
    cluster.core.delete_namespace(name, propagation_policy="Background")


def process_pod(name: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A bare pod for the process nodes (their label and both taints' tolerations)."""
    return {
        "metadata": {"name": name, "labels": {"app": name}, "annotations": {"note": "hello"}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": dict(PROCESS_NODE_LABEL),
            "tolerations": PROCESS_TOLERATIONS,
            "containers": [
                {"image": "ignored", "resources": {"requests": {"cpu": "100m"}}, **c} for c in containers
            ],
            **spec,
        },
    }


def sh(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "ignored", "command": ["sh", "-c", script], **extra}


def pod_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        pod = cluster.core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return cluster.core.api_client.sanitize_for_serialization(pod)  # type: ignore[no-any-return]


def finished(cluster: Cluster, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        pod = pod_of(cluster, namespace, name)
        return pod if pod and pod["status"].get("phase") in ("Succeeded", "Failed") else None

    return wait_for(
        f"pod {namespace}/{name} finished",
        done,
        timeout=timeout,
        explain=lambda: (pod_of(cluster, namespace, name) or {}).get("status"),
    )


def printed(cluster: Cluster, namespace: str, name: str, text: str) -> dict[str, Any]:
    """The pod once its main container has printed ``text`` (it runs and got past its setup), read with its
    node: a read made before the binding shows no ``nodeName`` though the log (found on any node) has it."""

    def check() -> dict[str, Any] | None:
        pod = pod_of(cluster, namespace, name)
        bound = pod is not None and (pod.get("spec") or {}).get("nodeName")
        return pod if pod and bound and text in pod_log(pod, "main") else None

    return wait_for(f"{namespace}/{name} printed {text!r}", check, timeout=60)


def gone(cluster: Cluster, namespace: str, name: str, uid: str) -> bool:
    pod = pod_of(cluster, namespace, name)
    return pod is None or pod["metadata"]["uid"] != uid


def terminated(pod: dict[str, Any], container: str | None = None) -> dict[str, Any]:
    statuses = pod["status"]["containerStatuses"]
    status = next(s for s in statuses if container in (None, s["name"]))
    return status["state"]["terminated"]  # type: ignore[no-any-return]


def test_pod_env_is_resolved_as_a_kubelet_does(cluster: Cluster, namespace: str) -> None:
    cluster.core.create_namespaced_secret(
        namespace, {"metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}}
    )
    cluster.core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "settings"}, "data": {"mode": "fast", "level": "7"}}
    )
    env = [
        {"name": "PLAIN", "value": "plain-value"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
        {"name": "NOPE", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "absent", "optional": True}}},
        {"name": "COMBINED", "value": "$(POD_NAME)/$(MODE)/$(UNDEFINED)/$$(POD_NAME)"},
    ]
    script = (  # no `$$` here: in a pod command it is the kubelet's escape of `$`
        'echo "args=$0 $1"; for v in PLAIN POD_NAME POD_NS POD_UID APP NOTE NODE TOKEN MODE COMBINED '
        'CFG_level HOME HOSTNAME PYTHONPATH; do echo "$v=$(printenv $v)"; done; echo "NOPE=${NOPE-unset}"; '
        'echo "cwd=$(pwd)"; '
        "python -c \"import devcluster, sys; print('python=' + sys.prefix)\""
    )
    pod = process_pod(
        "env-probe",
        [
            {
                "name": "main",
                "command": ["sh", "-c", script, "$(POD_NAME)", "$(MODE)-$$(MODE)"],
                "env": env,
                "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "settings"}}],
            }
        ],
    )
    cluster.core.create_namespaced_pod(namespace, pod)
    done = finished(cluster, namespace, "env-probe")
    assert done["status"]["phase"] == "Succeeded", done["status"]
    node, uid = done["spec"]["nodeName"], done["metadata"]["uid"]
    assert node in process_nodes(cluster)
    directory = pod_dir(done)
    assert directory.name == f"{namespace}_env-probe_{uid[:8]}"
    lines = dict(line.split("=", 1) for line in pod_log(done, "main").splitlines() if "=" in line)
    assert lines == {
        "args": "env-probe fast-$(MODE)",
        "PLAIN": "plain-value",
        "POD_NAME": "env-probe",
        "POD_NS": namespace,
        "POD_UID": uid,
        "APP": "env-probe",
        "NOTE": "hello",
        "NODE": node,
        "TOKEN": "s3cret",
        "MODE": "fast",
        "COMBINED": "env-probe/fast/$(UNDEFINED)/$(POD_NAME)",
        "CFG_level": "7",
        "HOME": str(directory),
        "HOSTNAME": "env-probe",
        "PYTHONPATH": str(REPO),
        "NOPE": "unset",
        "cwd": str(directory),
        "python": str(REPO / ".venv"),
    }


def test_exit_codes_restarts_init_and_start_errors(cluster: Cluster, namespace: str) -> None:
    pods = {
        "ok": process_pod("ok", [sh("main", "exit 0")]),
        "three": process_pod("three", [sh("main", "echo failing; exit 3")]),
        "missing": process_pod("missing", [{"name": "main", "command": ["no-such-program-27"]}]),
        # OnFailure: the first run fails, the restart (same pod directory) succeeds
        "retry": process_pod(
            "retry", [sh("main", "[ -f ran ] && exit 0; touch ran; exit 1")], restartPolicy="OnFailure"
        ),
        # an init container runs first; both containers run and the pod ends when both ended
        "multi": process_pod(
            "multi",
            [sh("a", "cat from-init; sleep 1"), sh("b", "exit 0")],
            initContainers=[sh("init", "echo prepared > from-init")],
        ),
    }
    for body in pods.values():
        cluster.core.create_namespaced_pod(namespace, body)
    done = {name: finished(cluster, namespace, name) for name in pods}

    assert done["ok"]["status"]["phase"] == "Succeeded"
    assert terminated(done["ok"])["reason"] == "Completed" and terminated(done["ok"])["exitCode"] == 0
    assert done["three"]["status"]["phase"] == "Failed"
    assert (terminated(done["three"])["exitCode"], terminated(done["three"])["reason"]) == (3, "Error")
    assert pod_log(done["three"], "main") == "failing\n"
    missing = terminated(done["missing"])
    assert done["missing"]["status"]["phase"] == "Failed"
    assert (missing["exitCode"], missing["reason"]) == (128, "StartError")
    assert "no-such-program-27" in missing["message"]
    retry = done["retry"]["status"]
    assert retry["phase"] == "Succeeded" and retry["containerStatuses"][0]["restartCount"] == 1, retry
    assert retry["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1
    multi = done["multi"]
    assert multi["status"]["phase"] == "Succeeded"
    assert multi["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert pod_log(multi, "a") == "prepared\n"
    assert {s["name"] for s in multi["status"]["containerStatuses"]} == {"a", "b"}


def test_pods_log_is_served_by_the_process_node(cluster: Cluster, namespace: str) -> None:
    """``pods/log`` through the API server reaches the node's kubelet API (HTTPS on 127.0.0.1, the port in
    the Node's daemonEndpoints), which reads the container's log file: what ``failed_index_log_tails`` reads
    for a failed index."""
    count = 'i=1; while [ $i -le 300 ]; do echo "line $i"; i=$((i+1)); done; exit 1'
    body = process_pod("logs", [sh("main", count), sh("side", "echo side-car; echo oops >&2")])
    cluster.core.create_namespaced_pod(namespace, body)
    done = finished(cluster, namespace, "logs")
    assert done["status"]["phase"] == "Failed" and terminated(done, "main")["exitCode"] == 1

    node = cluster.core.read_node(done["spec"]["nodeName"])
    port = node.status.daemon_endpoints.kubelet_endpoint.port
    assert PORTS.procnode_kubelet <= port < PORTS.procnode_kubelet + MAX_PROCESS_NODES

    def read(container: str, **kwargs: Any) -> str:
        answer = cluster.core.read_namespaced_pod_log(  # raw: the client would make the body str(bytes)
            "logs", namespace, container=container, _request_timeout=10, _preload_content=False, **kwargs
        )
        return bytes(answer.data).decode()

    assert read("main", tail_lines=5) == "".join(f"line {i}\n" for i in range(296, 301))
    limited = read("main", limit_bytes=10)
    assert len(limited.encode()) <= 10 and "line 1\nline 2\n".startswith(limited), limited
    assert read("main", tail_lines=3, limit_bytes=4) == "line"
    assert read("main", tail_lines=0) == ""
    assert read("main") == pod_log(done, "main")  # all of it: the file the node wrote
    assert read("side") == "side-car\noops\n"  # its own file, stdout and stderr


def _events(node: str, namespace: str, pod: str) -> list[dict[str, Any]]:
    return [e for e in journal(node) if e["pod"] == f"{namespace}/{pod}"]


def _reported_running(cluster: Cluster, namespace: str, name: str) -> bool:
    pod = pod_of(cluster, namespace, name) or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any((s.get("state") or {}).get("running") for s in statuses)


def test_delete_with_grace_sigterm_then_sigkill(cluster: Cluster, namespace: str) -> None:
    polite = sh(
        "main", "trap 'sleep 1; echo cleaned > marker; exit 0' TERM; echo up; while :; do sleep 0.2; done"
    )
    stubborn = sh("main", "trap '' TERM; echo up; while :; do sleep 0.2; done")
    for name, container in (("polite", polite), ("stubborn", stubborn)):
        cluster.core.create_namespaced_pod(namespace, process_pod(name, [container]))
    running = {name: printed(cluster, namespace, name, "up") for name in ("polite", "stubborn")}
    # Delete only once the API server shows the container running: virtual-kubelet force-deletes a deleted pod
    # whose reported status has no running container (its PR #760), and the node then kills with no grace. A
    # kubelet reports before a user can see the pod run; under load the node's status sync can lag the log.
    for name in running:
        wait_for(f"{name} reported running", partial(_reported_running, cluster, namespace, name), timeout=60)
    for name in running:
        cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=5)
    for name, pod in running.items():
        wait_for(f"{name} gone", partial(gone, cluster, namespace, name, pod["metadata"]["uid"]), timeout=60)

    polite_ev = _events(running["polite"]["spec"]["nodeName"], namespace, "polite")
    stubborn_ev = _events(running["stubborn"]["spec"]["nodeName"], namespace, "stubborn")
    assert [e["event"] for e in polite_ev] == ["start", "signal", "exit"], polite_ev
    assert polite_ev[1]["signal"] == "SIGTERM" and polite_ev[2]["exit_code"] == 0
    assert 0.9 < polite_ev[2]["t"] - polite_ev[1]["t"] < 4.5, "the trap ran within its grace"
    assert (pod_dir(running["polite"]) / "marker").read_text() == "cleaned\n"
    assert [e["event"] for e in stubborn_ev] == ["start", "signal", "signal", "exit"], stubborn_ev
    assert [e["signal"] for e in stubborn_ev[1:3]] == ["SIGTERM", "SIGKILL"]
    assert 4.8 < stubborn_ev[2]["t"] - stubborn_ev[1]["t"] < 7, "SIGKILL when the 5 s grace was over"
    assert stubborn_ev[3]["exit_code"] == 137


def test_indexed_job_through_kueue_runs_on_process_nodes(cluster: Cluster) -> None:
    env = process_queues(cluster, "indexed-job-on-process-nodes")
    try:
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "shards", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {
                "completionMode": "Indexed",
                "completions": 3,
                "parallelism": 3,
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "ignored",
                                "command": ["sh", "-c", 'echo "index=$JOB_COMPLETION_INDEX"'],
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                    }
                },
            },
        }
        env.create_job(job)
        wait_for(
            "Job Complete",
            lambda: is_true(env.job("shards"), "Complete"),
            timeout=120,
            explain=lambda: (env.job("shards") or {}).get("status"),
        )
        pods = env.pods("shards")
        assert {p["spec"]["nodeName"] for p in pods} <= set(process_nodes(cluster))
        seen = {}
        for p in pods:
            index = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            seen[index] = pod_log(p, "main").strip()
            starts = [
                e
                for e in _events(p["spec"]["nodeName"], env.namespace, p["metadata"]["name"])
                if e["event"] == "start"
            ]
            assert starts and starts[0]["job"] == "shards" and starts[0]["index"] == int(index)
            assert starts[0]["cpu"] == pytest.approx(0.1)
        assert seen == {str(i): f"index={i}" for i in range(3)}
    finally:
        delete_kueue_env(env)


def test_process_nodes_are_ready_and_renew_their_lease(cluster: Cluster) -> None:
    nodes = process_nodes(cluster)
    assert len(nodes) >= 1, "DEVCLUSTER_PROCESS_NODES process nodes run (default 2)"
    for name in nodes:
        node = cluster.core.read_node(name)
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
        assert node.metadata.labels["kubernetes.azure.com/scalesetpriority"] == "spot"
        assert {(t.key, t.effect) for t in node.spec.taints} >= {
            ("airflow-kueue.io/process-node", "NoSchedule"),
            ("kubernetes.azure.com/scalesetpriority", "NoSchedule"),
        }
        assert node.status.allocatable["cpu"] == "4" and node.status.allocatable["pods"] == "32"
    lease_api = cluster.coordination if hasattr(cluster, "coordination") else None
    from kubernetes import client

    leases = lease_api or client.CoordinationV1Api(cluster.core.api_client)
    first = leases.read_namespaced_lease(nodes[0], "kube-node-lease").spec.renew_time
    wait_for(
        "the Lease renewed",
        lambda: leases.read_namespaced_lease(nodes[0], "kube-node-lease").spec.renew_time > first,
        timeout=30,
        interval=1,
    )


def test_go_unit_tests_of_the_provider() -> None:
    """The provider's own tests (env resolution, signals and grace, exit codes): no apiserver needed."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain")
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -trimpath"}
    res = subprocess.run(
        [go, "test", "-count=1", "./..."],
        cwd=PROCNODE_SRC,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.serial
def test_deleted_node_comes_back_and_its_pods_were_killed(cluster: Cluster, namespace: str) -> None:
    """AKS deletes an evicted spot VM's Node: what ran there dies, the pool gets the node back."""
    victim = process_nodes(cluster)[-1]
    body = process_pod("doomed", [sh("main", "trap '' TERM; echo up; while :; do sleep 0.2; done")])
    body["spec"]["nodeName"] = victim
    cluster.core.create_namespaced_pod(namespace, body)
    pod = printed(cluster, namespace, "doomed", "up")
    deleted_at = time.time()
    cluster.core.delete_node(victim)
    wait_for(
        f"{victim} back and Ready",
        lambda: (
            victim in process_nodes(cluster)
            and {c.type: c.status for c in cluster.core.read_node(victim).status.conditions}.get("Ready")
            == "True"
        ),
        timeout=90,
        interval=1,
    )
    events = _events(victim, namespace, "doomed")
    kills = [e for e in events if e["event"] == "signal"]
    assert kills and kills[0]["signal"] == "SIGKILL" and kills[0]["t"] - deleted_at < 10, events
    assert next(e for e in events if e["event"] == "exit")["exit_code"] == 137
    uid = pod["metadata"]["uid"]
    wait_for("the lost node's pod deleted", lambda: gone(cluster, namespace, "doomed", uid), timeout=60)


@pytest.mark.serial
def test_a_pod_evicted_while_its_procnode_is_down_is_ended_when_it_returns(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """The hour-long soak's stuck index: a Job pod evicted while its node's procnode was down stayed
    Terminating for ever (virtual-kubelet only force-deletes it; its Job, with a podFailurePolicy, waits for a
    terminal phase). The procnode that comes back ends it as a kubelet does: phase Failed, the eviction's
    DisruptionTarget kept (so the policy ignores it), and the index gets a new pod."""
    from tests.integration.soak.faults import ClusterComponent

    node = process_nodes(cluster)[0]
    procnode = ClusterComponent(tmp_path / "procnode.log")
    mark = tmp_path / "ran-once"
    script = f"[ -f {mark} ] && {{ echo second; exit 0; }}; touch {mark}; echo up; while :; do sleep 1; done"
    template = process_pod("held", [sh("main", script)], nodeSelector={"kubernetes.io/hostname": node})
    del template["metadata"]["name"]
    cluster.batch.create_namespaced_job(
        namespace,
        {
            "metadata": {"name": "held"},
            "spec": {
                "completionMode": "Indexed",
                "completions": 1,
                "backoffLimit": 0,
                "podFailurePolicy": {
                    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
                },
                "template": template,
            },
        },
    )
    first = wait_for("the Job's pod", lambda: (cluster.pods_of(namespace, "held") or [None])[0], timeout=60)
    first = printed(cluster, namespace, first["metadata"]["name"], "up")
    name, uid = first["metadata"]["name"], first["metadata"]["uid"]
    procnode.kill(f"procnode-{node.rsplit('-', 1)[-1]}")
    cluster.core.create_namespaced_pod_eviction(
        name, namespace, {"metadata": {"name": name, "namespace": namespace}}
    )
    procnode.heal(f"procnode-{node.rsplit('-', 1)[-1]}")
    wait_for(
        "the evicted pod ended and removed",
        lambda: gone(cluster, namespace, name, uid),
        timeout=60,
        explain=lambda: pod_of(cluster, namespace, name),
    )
    wait_for(
        "the Job Complete on its second pod",
        lambda: is_true(cluster.job(namespace, "held"), "Complete"),
        timeout=90,
        explain=lambda: (cluster.job(namespace, "held") or {}).get("status"),
    )
    assert (cluster.job(namespace, "held") or {})["status"].get("failed", 0) == 0, "the eviction was ignored"
    second = next(p for p in cluster.pods_of(namespace, "held") if p["metadata"]["uid"] != uid)
    assert pod_log(second, "main").strip() == "second"
