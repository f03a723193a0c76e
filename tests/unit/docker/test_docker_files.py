"""Static checks of docker/: Dockerfiles, compose.yaml and the kind cluster config (no Docker needed).

Both images build with the repository root as context (``docker build -f docker/<image>/Dockerfile .``), and
compose.yaml's relative paths are relative to docker/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
DOCKER = REPO / "docker"
AIRFLOW_DOCKERFILE = DOCKER / "airflow" / "Dockerfile"
SHARD_DOCKERFILE = DOCKER / "shard-worker" / "Dockerfile"
DOCKERFILES = [AIRFLOW_DOCKERFILE, SHARD_DOCKERFILE]
COMPOSE = DOCKER / "compose.yaml"
KIND_CONFIG = DOCKER / "kind" / "kind-config.yaml"
QUEUES = REPO / "example_dags" / "manifests" / "genomics-queues.yaml"

AIRFLOW_SERVICES = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
}
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
SPOT_LABELS = {"workload": "batch", "tier": "spot", "kubernetes.azure.com/scalesetpriority": "spot"}
SPOT_TAINT = {"key": "kubernetes.azure.com/scalesetpriority", "value": "spot", "effect": "NoSchedule"}
KUEUE_MANIFESTS = "https://github.com/kubernetes-sigs/kueue/releases/download/v0.19.2/manifests.yaml"


# --- Dockerfiles -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def instructions(dockerfile: Path) -> list[Instruction]:
    """The instructions, with comments dropped and ``\\`` continuations joined."""
    result: list[Instruction] = []
    pending = ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        result.append(Instruction(keyword.upper(), args.strip()))
        pending = ""
    assert not pending, f"{dockerfile}: ends inside a line continuation"
    return result


def copy_sources(instruction: Instruction) -> list[str]:
    """The context paths a COPY/ADD reads (none for ``--from``, which copies from another stage)."""
    args = instruction.args
    words: list[str] = json.loads(args) if args.startswith("[") else shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    if any(f.startswith("--from=") for f in flags):
        return []
    paths = [w for w in words if not w.startswith("--")]
    assert len(paths) >= 2, f"{instruction.keyword} {args}: needs a source and a destination"
    return paths[:-1]


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex (Go filepath.Match plus ``**``)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def ignored(path: str, dockerignore: Path) -> bool:
    """Whether the build context drops ``path``: the last pattern matching it or a parent folder wins."""
    if not dockerignore.exists():
        return False
    parts = Path(path).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for raw in dockerignore.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        regex = _glob_regex(line.lstrip("!").strip().strip("/"))
        if any(regex.fullmatch(c) for c in candidates):
            excluded = not negate
    return excluded


def context_files(source: Path) -> Iterator[Path]:
    if source.is_dir():
        yield from (p for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    else:
        yield source


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a RUN line, split at ``&&``, ``||``, ``;`` and ``|`` outside quotes."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", "||", ";", "|"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_copy_sources_exist_in_the_build_context(dockerfile: Path) -> None:
    dockerignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
    copies = [i for i in instructions(dockerfile) if i.keyword in ("COPY", "ADD")]
    assert copies, f"{dockerfile} copies nothing"
    for instruction in copies:
        for source in copy_sources(instruction):
            assert not re.match(r"[a-z]+://", source), f"{dockerfile}: ADD of a URL ({source}) is not pinned"
            path = REPO / source
            assert path.exists(), f"{dockerfile}: {instruction.keyword} source {source} is not in the repo"
            for file in context_files(path):
                rel = file.relative_to(REPO).as_posix()
                assert not ignored(rel, dockerignore), f"{dockerignore.name} drops {rel}, which is copied"


def _resolve_args(image: str, args: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in args, f"FROM {image}: ARG {name} has no default"
        return args[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, image)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_pin_a_tag(dockerfile: Path) -> None:
    args: dict[str, str] = {}
    stages: set[str] = set()
    froms = 0
    for instruction in instructions(dockerfile):
        if instruction.keyword == "ARG" and "=" in instruction.args:
            name, _, default = instruction.args.partition("=")
            args[name.strip()] = default.strip().strip('"')
        if instruction.keyword != "FROM":
            continue
        froms += 1
        words = [w for w in instruction.args.split() if not w.startswith("--")]
        image = _resolve_args(words[0], args)
        if len(words) == 3 and words[1].lower() == "as":
            stages.add(words[2])
        if image in stages or image == "scratch" or "@sha256:" in image:
            continue
        name, _, tag = image.rpartition("/")[2].partition(":")
        assert tag, f"{dockerfile}: FROM {image} has no tag"
        assert tag != "latest", f"{dockerfile}: FROM {image} uses latest"
    assert froms, f"{dockerfile} has no FROM"


def test_airflow_image_is_airflow_3_3_2_with_the_provider_and_dags() -> None:
    steps = instructions(AIRFLOW_DOCKERFILE)
    assert next(i.args for i in steps if i.keyword == "FROM").startswith("apache/airflow:3.3.2")
    runs = " ".join(i.args for i in steps if i.keyword == "RUN")
    assert "pip install" in runs and '"apache-airflow==${AIRFLOW_VERSION}"' in runs
    copies = [i.args for i in steps if i.keyword == "COPY"]
    assert any("example_dags/" in c and c.rstrip().endswith("/opt/airflow/dags/") for c in copies)


def test_shard_worker_image_keeps_airflow_out() -> None:
    """The shard image installs the worker package with its own dependencies: no Airflow, no --no-deps."""
    steps = instructions(SHARD_DOCKERFILE)
    installs = []
    for instruction in steps:
        assert "apache-airflow" not in instruction.args, f"shard-worker installs Airflow: {instruction}"
        if instruction.keyword != "RUN":
            continue
        for words in shell_commands(instruction.args):
            if words[:2] == ["pip", "install"]:
                assert "--no-deps" not in words, shlex.join(words)
                installs.append(words[2:])
    assert installs == [["/tmp/src/worker-package"]], installs
    package = tomllib.loads((REPO / "worker-package" / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower() for req in package["dependencies"]}
    assert names == {"azure-storage-blob", "azure-identity"}


def test_shard_worker_runs_the_sample_shard_as_non_root() -> None:
    steps = instructions(SHARD_DOCKERFILE)
    assert next(i.args for i in steps if i.keyword == "FROM").startswith("python:3.11-slim")
    users = [i.args.split(":")[0] for i in steps if i.keyword == "USER"]
    assert users and users[-1] not in ("root", "0"), "the shard image must end as a non-root user"
    entrypoints = [json.loads(i.args) for i in steps if i.keyword == "ENTRYPOINT"]
    assert entrypoints and entrypoints[-1] == ["python", "-m", "airflow_kueue_provider.worker.sample_shard"]


def test_worker_sdk_imports_without_airflow_or_kubernetes() -> None:
    """What the shard image relies on: the worker imports with only the stdlib and the Azure libraries."""
    script = (
        "import sys\n"
        "import airflow_kueue_provider.worker.sample_shard\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'airflow', 'kubernetes', 'kubernetes_asyncio', 'yaml', 'pendulum', 'sqlalchemy'})\n"
        "print(','.join(bad))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"the worker SDK imports {done.stdout.strip()}"


# --- compose.yaml ------------------------------------------------------------------------------------------


_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>\w+)(?::?-(?P<default>[^}]*))?\}|\$(?P<bare>\w+)")


def interpolate(value: Any) -> Any:
    """Compose's variable substitution, every variable unset: ``${X:-default}`` → default, ``$$`` → ``$``."""
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if not isinstance(value, str):
        return value
    return _VARIABLE.sub(lambda m: "$" if m.group(0) == "$$" else (m.group("default") or ""), value)


@pytest.fixture(scope="module")
def raw_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def compose(raw_compose: dict[str, Any]) -> dict[str, Any]:
    return dict(interpolate(raw_compose))


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    bind: bool


def mounts_of(service: dict[str, Any]) -> list[Mount]:
    result = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            source, target = str(volume.get("source", "")), str(volume["target"])
            bind = volume.get("type") == "bind"
        else:
            source, _, rest = str(volume).partition(":")
            target = rest.split(":")[0]
            bind = source.startswith((".", "/", "~"))
        result.append(Mount(source, target, bind))
    return result


def host_path(source: str) -> Path:
    return (DOCKER / Path(source).expanduser()).resolve()


def test_services_build_from_existing_dockerfiles_with_the_repo_root_as_context(
    compose: dict[str, Any],
) -> None:
    built = set()
    for name, service in compose["services"].items():
        build = service.get("build")
        if build is None:
            continue
        if isinstance(build, str):
            build = {"context": build}
        context = (DOCKER / build.get("context", ".")).resolve()
        dockerfile = (context / build.get("dockerfile", "Dockerfile")).resolve()
        assert context.is_dir(), f"{name}: build context {context} does not exist"
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
        assert context == REPO, f"{name}: the Dockerfiles' COPY paths assume the repository root as context"
        built.add(dockerfile)
    assert built == set(DOCKERFILES)


def test_bind_mounts_into_the_repo_exist(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for mount in mounts_of(service):
            if not mount.bind:
                assert mount.source in (compose.get("volumes") or {}), f"{name}: undeclared {mount.source}"
                continue
            path = host_path(mount.source)
            if path.is_relative_to(REPO):
                assert path.exists(), f"{name}: bind mount source {mount.source} ({path}) does not exist"


def test_airflow_services_share_the_common_config(raw_compose: dict[str, Any]) -> None:
    common = raw_compose["x-airflow-common"]
    services = raw_compose["services"]
    assert env_of(common)["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert set(AIRFLOW_SERVICES) <= set(services)
    airflow_like = {n for n, s in services.items() if n.startswith("airflow-")}
    for name in airflow_like:
        service = services[name]
        for key in ("image", "build", "volumes", "user", "networks"):
            assert service.get(key) == common.get(key), f"{name}: {key} differs from x-airflow-common"
        assert env_of(common).items() <= env_of(service).items(), f"{name}: not the common environment"
        assert set(common["depends_on"]) <= set(service.get("depends_on") or {})
    for name, command in AIRFLOW_SERVICES.items():
        assert services[name]["command"] == command


def test_references_between_services_resolve(compose: dict[str, Any]) -> None:
    services = compose["services"]
    networks = set(compose.get("networks") or {}) | {"default"}
    for name, service in services.items():
        assert set(service.get("depends_on") or {}) <= set(services), f"{name}: depends on a missing service"
        assert set(service.get("networks") or []) <= networks, f"{name}: joins an undeclared network"
    assert services["airflow-apiserver"]["ports"] == ["8080:8080"]
    api_url = env_of(compose["x-airflow-common"])["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"]
    assert urlsplit(api_url).hostname == "airflow-apiserver"


def test_azurite_serves_blob_on_10000(compose: dict[str, Any]) -> None:
    azurite = compose["services"]["azurite"]
    image, _, tag = azurite["image"].rpartition(":")
    assert image == "mcr.microsoft.com/azure-storage/azurite" and tag and tag != "latest"
    command = azurite["command"] if isinstance(azurite["command"], list) else shlex.split(azurite["command"])
    assert command[0] == "azurite-blob", "blob service only"
    assert command[command.index("--blobPort") + 1] == "10000"
    published = [str(p) for p in azurite.get("ports") or []] + [str(p) for p in azurite.get("expose") or []]
    assert any(p == "10000" or p.endswith(":10000") for p in published)


def test_connections_parse_as_json(compose: dict[str, Any]) -> None:
    env = env_of(compose["x-airflow-common"])
    conns = {k: json.loads(v) for k, v in env.items() if k.startswith("AIRFLOW_CONN_")}
    assert set(conns) == {"AIRFLOW_CONN_KUBERNETES_DEFAULT", "AIRFLOW_CONN_KUEUE_BLOB_DEFAULT"}
    assert all(isinstance(c, dict) and c.get("conn_type") for c in conns.values())

    kube = conns["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    assert kube["conn_type"] == "kubernetes"
    kube_config = kube["extra"]["kube_config_path"]
    mounts = [m for m in mounts_of(compose["x-airflow-common"]) if m.bind]
    holder = [m for m in mounts if kube_config.startswith(m.target.rstrip("/") + "/")]
    assert holder, f"{kube_config} is not inside a bind mount"
    folder = host_path(holder[0].source)
    assert folder.is_dir()
    written = (folder / kube_config[len(holder[0].target) :].lstrip("/")).relative_to(folder).as_posix()
    assert written in (folder / ".gitignore").read_text().split(), "git must ignore the kubeconfig"

    blob = conns["AIRFLOW_CONN_KUEUE_BLOB_DEFAULT"]
    fields = dict(p.partition("=")[::2] for p in blob["extra"]["connection_string"].split(";") if p)
    assert fields["AccountName"] == "devstoreaccount1"
    assert fields["AccountKey"] == AZURITE_KEY
    endpoint = urlsplit(fields["BlobEndpoint"])
    assert (endpoint.hostname, endpoint.port, endpoint.path) == ("azurite", 10000, "/devstoreaccount1")
    for key in re.findall(r"AccountKey=([^;\"']+)", COMPOSE.read_text()):
        assert key == AZURITE_KEY


# --- kind ---------------------------------------------------------------------------------------------------


def taints_of(node: dict[str, Any]) -> list[dict[str, str]]:
    taints: list[dict[str, str]] = []
    for patch in node.get("kubeadmConfigPatches") or []:
        doc = yaml.safe_load(patch)
        if doc.get("kind") in ("JoinConfiguration", "InitConfiguration"):
            taints += doc.get("nodeRegistration", {}).get("taints") or []
    return taints


def test_kind_cluster_has_spot_workers_and_one_system_worker() -> None:
    config = yaml.safe_load(KIND_CONFIG.read_text())
    assert (config["kind"], config["apiVersion"]) == ("Cluster", "kind.x-k8s.io/v1alpha4")
    roles = [n["role"] for n in config["nodes"]]
    assert roles.count("control-plane") == 1
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    spot = [n for n in workers if (n.get("labels") or {}).get("tier") == "spot"]
    system = [n for n in workers if n not in spot]
    assert spot, "no Spot workers"
    for node in spot:
        assert SPOT_LABELS.items() <= node["labels"].items()
        assert SPOT_TAINT in taints_of(node)
    assert len(system) == 1 and taints_of(system[0]) == []
    assert not SPOT_LABELS.items() & (system[0].get("labels") or {}).items()


def test_genomics_flavor_lands_on_the_kind_spot_workers() -> None:
    config = yaml.safe_load(KIND_CONFIG.read_text())
    spot = [n for n in config["nodes"] if (n.get("labels") or {}).get("tier") == "spot"]
    flavors = [d for d in yaml.safe_load_all(QUEUES.read_text()) if d and d["kind"] == "ResourceFlavor"]
    assert flavors
    for flavor in flavors:
        assert flavor["spec"]["nodeLabels"].items() <= spot[0]["labels"].items()
        tolerated = {(t["key"], t.get("value"), t["effect"]) for t in flavor["spec"].get("tolerations", [])}
        assert all((t["key"], t["value"], t["effect"]) in tolerated for t in taints_of(spot[0]))


def test_readmes_name_existing_files_and_the_kueue_release() -> None:
    kind_readme = (DOCKER / "kind" / "README.md").read_text()
    assert f"kubectl apply --server-side -f {KUEUE_MANIFESTS}" in kind_readme
    assert "example_dags/manifests/genomics-queues.yaml" in kind_readme
    assert "kind get kubeconfig --internal" in kind_readme
    for readme in (DOCKER / "README.md", DOCKER / "kind" / "README.md"):
        text = readme.read_text()
        for path in re.findall(r"(?:-f|--config) (\S+\.ya?ml|\S*Dockerfile)\b", text):
            if not path.startswith("http"):
                assert (REPO / path).is_file(), f"{readme.name}: {path} does not exist"
    assert "docker build -f docker/airflow/Dockerfile" in (DOCKER / "README.md").read_text()
