"""A real Kubernetes control plane on loopback: etcd and kube-apiserver processes (kube-scheduler
processes beside it: ``devstack.scheduler``).

No kubelet and no controller-manager run: nodes are API objects whose status the caller writes,
and pods are bound by kube-scheduler (through our extenders) and never started. Binaries come
from ``KUBE_BIN_DIR`` when set, else from ``PATH``. Used by the demo, the end-to-end tests and
the benchmarks; nothing here depends on pytest.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import os
import secrets
import shutil
import ssl
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trustme
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app.serving.embedded_redis import die_with_parent, free_port, stop_process
from devstack import http_client, releases
from devstack.releases import Release

BINARIES = ("etcd", "kube-apiserver", "kube-scheduler")
REPO = Path(__file__).resolve().parents[1]
EXTENDER_MANIFEST = REPO / "deploy" / "base" / "rbac.yaml"
EXTENDER_NAMESPACE = "kube-gang-extender"
EXTENDER_USER = f"system:serviceaccount:{EXTENDER_NAMESPACE}:kube-gang-extender"


class ControlPlaneError(RuntimeError):
    """A control-plane process did not start, or stopped answering."""


def find_binaries(release: Release | None = None) -> tuple[dict[str, str], list[str]]:
    """``({name: path}, [missing names])``: ``KUBE_BIN_DIR`` first, then ``PATH``. With a release,
    kube-apiserver and kube-scheduler are that release's (found, or built: devstack.releases)."""
    found: dict[str, str] = {}
    missing: list[str] = []
    bin_dir = os.environ.get("KUBE_BIN_DIR")
    for name in BINARIES:
        candidate = Path(bin_dir) / name if bin_dir else None
        if release is not None and name != "etcd":
            found[name] = str(releases.binaries(release) / name)
        elif candidate is not None and os.access(candidate, os.X_OK):
            found[name] = str(candidate)
        elif path := shutil.which(name):
            found[name] = path
        else:
            missing.append(name)
    return found, missing


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Process:
    """A child process with its output in a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, name: str, args: Sequence[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("ab")
        # The kernel stops the child when the test process dies, even by SIGKILL: no stray etcd.
        self.proc = subprocess.Popen(
            list(args),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            preexec_fn=die_with_parent,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self, tail: int | None = 6000) -> str:
        """The log's last ``tail`` characters (None: all of it)."""
        self._log.flush()
        text = self.log_path.read_text(errors="replace")
        return text if tail is None else text[-tail:]

    def stop(self, timeout: float = 10.0) -> None:
        stop_process(self.proc, timeout)
        self._log.close()


def wait_ready(check: Any, what: str, process: Process, timeout: float) -> None:
    """Poll ``check`` until it holds; fails with the process's log when it exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if not process.alive():
            raise ControlPlaneError(f"{process.name} exited with {process.proc.returncode}:\n{process.log()}")
        try:
            if check():
                return
        except (httpx.HTTPError, OSError) as exc:
            last = exc
        time.sleep(0.2)
    raise ControlPlaneError(f"{what} not ready within {timeout:.0f}s (last error: {last}):\n{process.log()}")


def apply_extender_rbac(http: httpx.Client) -> list[str]:
    """The extender's ClusterRole and ClusterRoleBinding exactly as deploy/ ships them; their names."""
    applied = []
    for doc in yaml.safe_load_all(EXTENDER_MANIFEST.read_text()):
        if not doc or doc.get("kind") not in ("ClusterRole", "ClusterRoleBinding"):
            continue
        plural = "clusterroles" if doc["kind"] == "ClusterRole" else "clusterrolebindings"
        resp = http.post(f"/apis/rbac.authorization.k8s.io/v1/{plural}", json=doc)
        if resp.status_code not in (201, 409):
            raise ControlPlaneError(f"applying {doc['kind']}: {resp.status_code} {resp.text}")
        applied.append(f"{doc['kind']}/{doc['metadata']['name']}")
    return applied


@dataclass
class ControlPlane:
    """etcd + kube-apiserver with TLS and token auth; ``kubeconfig`` is an admin (system:masters) one."""

    workdir: Path
    binaries: dict[str, str]
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    # The extender's own identity: the ServiceAccount deploy/ grants its ClusterRole to.
    extender_token: str = field(default_factory=lambda: secrets.token_hex(16))
    processes: list[Process] = field(default_factory=list)
    # Feature gates of the cluster ("GenericWorkload=true"), for kube-apiserver and every kube-scheduler
    # started on it, and the API versions to serve beyond the defaults ("scheduling.k8s.io/v1beta1=true").
    feature_gates: str = ""
    runtime_config: str = ""
    url: str = ""
    ca_file: Path = field(init=False)
    kubeconfig: Path = field(init=False)

    @property
    def version(self) -> str:
        """The release kube-apiserver reports ("1.37.2"), or "" when it does not say."""
        return releases.binary_version(self.binaries["kube-apiserver"]) or ""

    def start(self, timeout: float = 90.0) -> ControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_certificates()
        etcd_port, etcd_peer = free_port(), free_port()
        etcd = Process(
            "etcd",
            [
                self.binaries["etcd"],
                "--name",
                "e2e",
                "--data-dir",
                str(self.workdir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{etcd_peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{etcd_peer}",
                "--initial-cluster",
                f"e2e=http://127.0.0.1:{etcd_peer}",
                # A test cluster: losing the last writes on a crash does not matter, fsync latency does.
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ],
            self.workdir,
        )
        self.processes.append(etcd)
        wait_ready(
            lambda: http_client.get(f"http://127.0.0.1:{etcd_port}/health", timeout=1).status_code == 200,
            "etcd",
            etcd,
            30,
        )
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        certs = self.workdir / "pki"
        apiserver = Process(
            "kube-apiserver",
            [
                self.binaries["kube-apiserver"],
                "--etcd-servers",
                f"http://127.0.0.1:{etcd_port}",
                "--bind-address",
                "127.0.0.1",
                "--advertise-address",
                "127.0.0.1",
                # No `kubernetes` Service endpoints to keep: newer releases refuse a loopback address for them.
                "--endpoint-reconciler-type",
                "none",
                "--secure-port",
                str(port),
                "--tls-cert-file",
                str(certs / "apiserver.crt"),
                "--tls-private-key-file",
                str(certs / "apiserver.key"),
                "--client-ca-file",
                str(certs / "ca.crt"),
                "--token-auth-file",
                str(certs / "tokens.csv"),
                "--authorization-mode",
                "Node,RBAC",
                "--service-account-key-file",
                str(certs / "sa.pub"),
                "--service-account-signing-key-file",
                str(certs / "sa.key"),
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-cluster-ip-range",
                "10.96.0.0/16",
                "--cert-dir",
                str(certs),
                "--profiling=false",
                # Deleting a namespace's pods between tests and benchmark phases: one worker deletes 10000
                # pods slower than the request timeout on a slow machine.
                "--delete-collection-workers=4",
                "--v=1",
                *([f"--feature-gates={self.feature_gates}"] if self.feature_gates else []),
                *([f"--runtime-config={self.runtime_config}"] if self.runtime_config else []),
            ],
            self.workdir,
        )
        self.processes.append(apiserver)
        wait_ready(self._ready, "kube-apiserver", apiserver, timeout)
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(self.kubeconfig_document(self.token)))
        self._apply_extender_rbac()
        return self

    def _apply_extender_rbac(self) -> None:
        """The ClusterRole and its binding exactly as deploy/ ships them: the replicas run with them."""
        with self.client() as http:
            apply_extender_rbac(http)

    def _write_certificates(self) -> None:
        certs = self.workdir / "pki"
        certs.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name="e2e")
        leaf = ca.issue_cert("127.0.0.1", "localhost", "kubernetes.default.svc")
        self.ca_file = certs / "ca.crt"
        self.ca_file.write_bytes(ca.cert_pem.bytes())
        (certs / "apiserver.crt").write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        (certs / "apiserver.key").write_bytes(leaf.private_key_pem.bytes())
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (certs / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        (certs / "sa.pub").write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        (certs / "tokens.csv").write_text(
            f'{self.token},e2e-admin,e2e-admin,"system:masters"\n'
            f'{self.extender_token},{EXTENDER_USER},extender,"system:serviceaccounts,system:serviceaccounts:{EXTENDER_NAMESPACE}"\n'
        )
        self._ca = ca

    def kubeconfig_document(self, token: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "e2e", "cluster": {"server": self.url, "certificate-authority-data": _b64(self.ca_pem)}}
            ],
            "users": [{"name": "e2e", "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
            "current-context": "e2e",
        }

    @property
    def ca_pem(self) -> bytes:
        return self.ca_file.read_bytes()

    def issue_server_cert(self, directory: Path, *names: str) -> tuple[Path, Path]:
        """A serving certificate signed by the cluster CA (for extenders served over TLS)."""
        leaf = self._ca.issue_cert(*(names or ("127.0.0.1",)))
        stem = directory / f"serving-{secrets.token_hex(3)}"
        cert, key = stem.with_suffix(".crt"), stem.with_suffix(".key")
        cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        key.write_bytes(leaf.private_key_pem.bytes())
        return cert, key

    def _ready(self) -> bool:
        resp = httpx.get(
            f"{self.url}/readyz",
            headers={"Authorization": f"Bearer {self.token}"},
            verify=ssl.create_default_context(cafile=str(self.ca_file)),
            timeout=2,
        )
        return resp.status_code == 200 and resp.text.strip() == "ok"

    def client(self, timeout: float = 15.0) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.token}"},
            verify=ssl.create_default_context(cafile=str(self.ca_file)),
            timeout=timeout,
        )

    def alive(self) -> bool:
        return all(p.alive() for p in self.processes)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextlib.contextmanager
def running_control_plane(workdir: Path) -> Any:
    """A started control plane for a ``with`` block (benchmarks); raises when binaries are missing."""
    binaries, missing = find_binaries()
    if missing:
        raise ControlPlaneError(f"missing control-plane binaries: {', '.join(missing)} (set KUBE_BIN_DIR)")
    plane = ControlPlane(workdir, binaries)
    try:
        yield plane.start()
    finally:
        plane.stop()
