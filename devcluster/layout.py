"""Where the local cluster keeps its files, and the loopback ports its processes listen on."""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEVCLUSTER_SRC = Path(__file__).resolve().parent
HOST = "127.0.0.1"

# Azurite's published development account: a well-known constant, not a secret.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True)
class Ports:
    etcd_client: int = 23790
    etcd_peer: int = 23800
    etcd_metrics: int = 23810
    apiserver: int = 26443
    controller_manager: int = 20257
    scheduler: int = 20259
    kwok: int = 20247
    kueue_webhook: int = 9443
    kueue_metrics: int = 28443
    kueue_health: int = 28081
    kueue_visibility: int = 8082
    azurite_blob: int = 10000
    jobset_webhook: int = 9450
    jobset_metrics: int = 28450
    jobset_health: int = 28050
    procnode_health: int = 20270
    """Process node ``n`` (``procnode-n``) answers ``/healthz`` on this port plus ``n``."""
    procnode_kubelet: int = 20300
    """Process node ``n`` serves the kubelet API (HTTPS, container logs for ``pods/log``) on this port plus
    ``n``. Both ranges hold ``MAX_PROCESS_NODES`` ports, below MultiKueue worker 1's first port (20347)."""

    def shifted(self, by: int) -> Ports:
        """Every port moved by ``by``: another cluster's processes on the same loopback address."""
        return Ports(**{f.name: getattr(self, f.name) + by for f in dataclasses.fields(self)})


PORTS = Ports()
MAX_PROCESS_NODES = PORTS.procnode_kubelet - PORTS.procnode_health
"""Process nodes the port ranges above have room for (30)."""
WORKER_PORT_STEP = 100
"""MultiKueue worker ``n`` (1, 2, ...) listens on the manager's ports plus ``n * WORKER_PORT_STEP``."""
PORT_SHIFT_ENV = "DEVCLUSTER_PORT_SHIFT"
SIDE_BED_SHIFT = 1000
"""The shift a side bed uses (above every MultiKueue worker's)."""


def port_shift(raw: str | None) -> int:
    """``DEVCLUSTER_PORT_SHIFT``: unset or empty is 0; otherwise 1,000, 2,000 or 3,000 (the shifted ports
    stay below 32768, where Linux's ephemeral range starts)."""
    if not (raw or "").strip():
        return 0
    try:
        shift = int(str(raw).strip())
    except ValueError:
        shift = -1
    if shift < 0 or shift % SIDE_BED_SHIFT or shift > 3 * SIDE_BED_SHIFT:
        raise ValueError(f"{PORT_SHIFT_ENV}={raw!r}: use 1000, 2000 or 3000 (or leave it unset)")
    return shift


@dataclass(frozen=True)
class Layout:
    """Paths under the state directory (``.devcluster/`` in the repository by default), and the ports of the
    cluster kept there. The default is the main cluster (MultiKueue's manager when workers run); a worker
    keeps its own state under ``workers/<name>`` and shares the main cluster's CA."""

    state: Path
    ports: Ports = PORTS
    shared_pki: Path | None = None

    @classmethod
    def default(cls) -> Layout:
        """``DEVCLUSTER_STATE`` (else ``.devcluster/``), every port moved by ``DEVCLUSTER_PORT_SHIFT`` (a
        second bed beside the main one: the oldest-Kueue lane)."""
        state = Path(os.environ.get("DEVCLUSTER_STATE", REPO / ".devcluster")).resolve()
        return cls(state, PORTS.shifted(port_shift(os.environ.get(PORT_SHIFT_ENV))))

    def worker(self, number: int) -> Layout:
        """MultiKueue worker cluster ``number`` (1, 2, ...)."""
        return Layout(
            self.state / "workers" / worker_name(number),
            self.ports.shifted(number * WORKER_PORT_STEP),
            shared_pki=self.pki,
        )

    def workers(self) -> list[Layout]:
        """The MultiKueue workers started from this cluster before (those with a state directory)."""
        base = self.state / "workers"
        found = [d.name for d in base.glob("worker-*")] if base.exists() else []
        return [self.worker(int(name.rsplit("-", 1)[1])) for name in sorted(found)]

    @property
    def is_worker(self) -> bool:
        return self.shared_pki is not None

    @property
    def name(self) -> str:
        return self.state.name if self.is_worker else "devcluster"

    @property
    def pki(self) -> Path:
        return self.shared_pki or self.state / "pki"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def pids(self) -> Path:
        return self.state / "pids"

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def env_file(self) -> Path:
        return self.state / "env"

    def exported_env(self) -> dict[str, str]:
        """The ``export KEY=value`` lines of ``env_file`` (``KUBECONFIG``,
        ``AZURE_STORAGE_CONNECTION_STRING``, ...) as a dict, as a shell that sources it would see them."""
        env = {}
        for line in self.env_file.read_text().splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export ") :].partition("=")
                env[key] = shlex.split(value)[0] if value else ""
        return env

    @property
    def etcd_data(self) -> Path:
        return self.state / "etcd"

    @property
    def kueue(self) -> Path:
        return self.state / "kueue"

    @property
    def kwok(self) -> Path:
        return self.state / "kwok"

    @property
    def azurite(self) -> Path:
        return self.state / "azurite"

    @property
    def jobset(self) -> Path:
        return self.state / "jobset"

    @property
    def procnode(self) -> Path:
        """The process nodes' state: ``<node>/journal.jsonl`` and ``<node>/pods/<ns>_<pod>_<uid8>/``."""
        return self.state / "procnode"

    def make_dirs(self) -> None:
        for d in (
            self.pki,
            self.logs,
            self.pids,
            self.etcd_data,
            self.kueue,
            self.kwok,
            self.azurite,
            self.jobset,
            self.procnode,
        ):
            d.mkdir(parents=True, exist_ok=True)


def worker_name(number: int) -> str:
    """The MultiKueueCluster name (and state directory) of worker ``number``."""
    return f"worker-{number}"


def azurite_connection_string(port: int = PORTS.azurite_blob) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://{HOST}:{port}/{AZURITE_ACCOUNT};"
    )


def write_atomically(path: Path, text: str, mode: int = 0o644) -> bool:
    """Replace ``path`` with ``text`` in one rename, and only when it differs: a process that reads the file
    meanwhile (another pytest worker's kubeconfig load) sees the old or the new content, never an empty file.
    Returns True when the content changed."""
    if path.exists() and path.read_text() == text:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)
    return True
