"""Certificates for the local control plane, made once with the openssl CLI.

One CA signs the apiserver's serving certificate, the admin client certificate (group system:masters, used by
every component and by tests), the front-proxy client certificate that lets the aggregator call Kueue's
visibility API server, and the JobSet controller's webhook serving certificate.  Kueue makes its own webhook
and visibility certificates (internal cert management).
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from .layout import HOST, PORTS, write_atomically

APISERVER_SANS = (
    f"IP:{HOST},IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
    "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
)


JOBSET_WEBHOOK_DNS = "jobset-webhook-service.jobset-system.svc"
JOBSET_WEBHOOK_CERT = "jobset-webhook"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _issue(pki: Path, name: str, subject: str, ext: str) -> None:
    if (pki / f"{name}.crt").exists():
        return
    (pki / f"{name}.ext").write_text(ext + "\n")
    _openssl(
        "req",
        "-new",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        subject,
        cwd=pki,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "3650",
        "-out",
        f"{name}.crt",
        "-extfile",
        f"{name}.ext",
        cwd=pki,
    )


def ensure_pki(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    if not (pki / "ca.crt").exists():
        _openssl(
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "3650",
            "-subj",
            "/CN=devcluster-ca",
            cwd=pki,
        )
    _issue(
        pki,
        "apiserver",
        "/CN=kube-apiserver",
        f"subjectAltName={APISERVER_SANS}\nextendedKeyUsage=serverAuth",
    )
    _issue(pki, "admin", "/O=system:masters/CN=devcluster-admin", "extendedKeyUsage=clientAuth")
    _issue(pki, "front-proxy-client", "/CN=front-proxy-client", "extendedKeyUsage=clientAuth")
    # JobSet's webhook server: the apiserver dials it through an ExternalName Service with this TLS name.
    _issue(
        pki,
        JOBSET_WEBHOOK_CERT,
        f"/CN={JOBSET_WEBHOOK_DNS}",
        f"subjectAltName=DNS:{JOBSET_WEBHOOK_DNS},DNS:localhost,IP:{HOST}\nextendedKeyUsage=serverAuth",
    )
    if not (pki / "sa.key").exists():
        _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
        _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def write_kubeconfig(pki: Path, path: Path, port: int = PORTS.apiserver, user: str = "admin") -> None:
    """A self-contained kubeconfig for the apiserver on ``port`` as ``user`` (a client certificate of this
    CA; certificates embedded, so it keeps working if copied)."""
    write_atomically(path, kubeconfig_text(pki, port, user), mode=0o600)


def kubeconfig_text(pki: Path, port: int = PORTS.apiserver, user: str = "admin") -> str:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    return f"""apiVersion: v1
kind: Config
clusters:
- name: devcluster
  cluster:
    server: https://{HOST}:{port}
    certificate-authority-data: {b64("ca.crt")}
users:
- name: devcluster-{user}
  user:
    client-certificate-data: {b64(user + ".crt")}
    client-key-data: {b64(user + ".key")}
contexts:
- name: devcluster
  context: {{cluster: devcluster, user: devcluster-{user}}}
current-context: devcluster
"""
