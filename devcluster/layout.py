"""Where the local cluster keeps its files, and the loopback ports its processes listen on."""

from __future__ import annotations

import os
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


PORTS = Ports()


@dataclass(frozen=True)
class Layout:
    """Paths under the state directory (``.devcluster/`` in the repository by default)."""

    state: Path

    @classmethod
    def default(cls) -> Layout:
        return cls(Path(os.environ.get("DEVCLUSTER_STATE", REPO / ".devcluster")).resolve())

    @property
    def pki(self) -> Path:
        return self.state / "pki"

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

    def make_dirs(self) -> None:
        for d in (self.pki, self.logs, self.pids, self.etcd_data, self.kueue, self.kwok, self.azurite):
            d.mkdir(parents=True, exist_ok=True)


def azurite_connection_string() -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint=http://{HOST}:{PORTS.azurite_blob}/{AZURITE_ACCOUNT};"
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
