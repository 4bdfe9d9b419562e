"""Helpers of the compose stack (docker-compose.yml), run from the test image as ``python -m devstack.compose``.

- ``pki DIR``: the stack's CA, serving certificates, client certificates, service-account keys, the
  extender's token and one kubeconfig per identity, made once per volume;
- ``setup``: waits for the API server, then applies the extender's RBAC exactly as deploy/ ships it and
  the PodGroup CRD;
- ``probe URL``: one health check with the stack's CA and the probe's client certificate, for the
  official control-plane images, which have no shell or HTTP client to run a healthcheck of their own
  (``idle`` keeps a container up to run it in).

``pki`` and ``setup`` stay up after their work until stopped: docker-compose 1.x ends the whole stack
under ``--exit-code-from`` as soon as any container exits, so one-shot services would end it early.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import secrets
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devstack import http_client
from devstack.controlplane import EXTENDER_USER, apply_extender_rbac
from devstack.kube import Kube, install_podgroup_crd
from extenders.kube.config import find_kubeconfig, httpx_params

PKI_DIR = Path("/pki")
APISERVER_URL = "https://kube-apiserver:6443"
# The first address of the compose API server's --service-cluster-ip-range (the kubernetes Service).
SERVICE_IP = "10.96.0.1"
DONE = ".done"
VALIDITY = datetime.timedelta(days=365)  # a test stack's; `down -v` makes new ones
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@dataclass(frozen=True)
class Identity:
    """A client of the API server authenticated by certificate: the user is the CN, the groups the O."""

    name: str
    user: str
    group: str | None = None
    app_readable: bool = False  # read by the image's non-root user (the test runner and the probes)


CLIENTS = (
    # kube-scheduler's built-in identity, which the API server's bootstrap RBAC already grants.
    Identity("scheduler", "system:kube-scheduler"),
    # The test runner and the set-up: they create nodes, CRDs and ClusterRoles.
    Identity("admin", "compose-admin", "system:masters", app_readable=True),
    # Health probes: any authenticated user may read /readyz and /healthz.
    Identity("probe", "compose-probe", app_readable=True),
)


def _kubeconfig(server: str, user: dict[str, str]) -> dict[str, Any]:
    # Relative paths resolve against the kubeconfig's own directory, wherever the volume is mounted.
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "compose", "cluster": {"server": server, "certificate-authority": "ca.crt"}}],
        "users": [{"name": "compose", "user": user}],
        "contexts": [{"name": "compose", "context": {"cluster": "compose", "user": "compose"}}],
        "current-context": "compose",
    }


class _CA:
    """A CA for the stack alone; its key lives only while the set-up runs."""

    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )

    def issue(self, common_name: str, group: str | None = None, names: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
        """``(certificate PEM, key PEM)``: a server certificate for ``names``, else a client one whose
        subject is what the API server reads as user (CN) and group (O)."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if group is not None:
            subject.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, group))
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if names else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(subject))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), False)
        cert = builder.sign(self.key, hashes.SHA256())
        pkcs8 = serialization.PrivateFormat.PKCS8
        key_pem = key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption())
        return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _key_usage(cert_sign: bool = False) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


class _Writer:
    """Files of the PKI directory: private by default, handed to the image's user where it reads them."""

    def __init__(self, directory: Path, app_owner: tuple[int, int] | None) -> None:
        self.directory = directory
        self.app_owner = app_owner

    def write(self, name: str, data: bytes, *, public: bool = False, app_readable: bool = False) -> None:
        path = self.directory / name
        path.write_bytes(data)
        path.chmod(0o644 if public else 0o600)
        if app_readable and self.app_owner is not None:
            os.chown(path, *self.app_owner)


def write_pki(directory: Path, server: str = APISERVER_URL, app_owner: tuple[int, int] | None = None) -> bool:
    """Everything the stack authenticates with, unless a previous run made it (False then).

    ``app_owner``: uid and gid of the image's non-root user, given the files it reads."""
    if (directory / DONE).exists():
        return False
    directory.mkdir(parents=True, exist_ok=True)
    files = _Writer(directory, app_owner)
    ca = _CA("kube-gang-extender compose CA")
    files.write("ca.crt", ca.cert.public_bytes(serialization.Encoding.PEM), public=True)
    serving = {
        "apiserver": ("kube-apiserver", "localhost", "127.0.0.1", "kubernetes.default.svc", SERVICE_IP),
        "kube-scheduler": ("kube-scheduler", "localhost", "127.0.0.1"),
    }
    for name, names in serving.items():
        cert, key_pem = ca.issue(name, names=names)
        files.write(f"{name}.crt", cert, public=True)
        files.write(f"{name}.key", key_pem)
    for client in CLIENTS:
        cert, key_pem = ca.issue(client.user, client.group)
        files.write(f"{client.name}.crt", cert, public=True)
        files.write(f"{client.name}.key", key_pem, app_readable=client.app_readable)
        user = {"client-certificate": f"{client.name}.crt", "client-key": f"{client.name}.key"}
        document = yaml.safe_dump(_kubeconfig(server, user)).encode()
        files.write(f"{client.name}.kubeconfig", document, app_readable=client.app_readable)
    # The extender authenticates as the ServiceAccount deploy/ binds its ClusterRole to, by a static token.
    token = secrets.token_hex(24)
    namespace = EXTENDER_USER.split(":")[2]
    groups = f"system:serviceaccounts,system:serviceaccounts:{namespace}"
    files.write("tokens.csv", f'{token},{EXTENDER_USER},kube-gang-extender,"{groups}"\n'.encode())
    document = yaml.safe_dump(_kubeconfig(server, {"token": token})).encode()
    files.write("extender.kubeconfig", document, app_readable=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = serialization.Encoding.PEM
    files.write("sa.key", key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    files.write("sa.pub", key.public_key().public_bytes(pem, spki), public=True)
    files.write(DONE, b"", public=True)
    return True


def kube_client(kubeconfig: Path, timeout: float = 15.0) -> httpx.Client:
    """A synchronous client from a kubeconfig, read the way the extender reads its own."""
    config = find_kubeconfig(str(kubeconfig))
    if config is None:
        raise FileNotFoundError(kubeconfig)
    params = httpx_params(config)
    params["timeout"] = timeout
    return http_client.client(**params)


def probe(url: str, pki: Path = PKI_DIR, timeout: float = 3.0) -> tuple[bool, str]:
    """``(healthy, what happened)``: GET ``url`` verified against the stack's CA, as the probe identity."""
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "probe.crt", pki / "probe.key")
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            body = resp.read(200).decode(errors="replace")
            return resp.status == 200 and body.strip() == "ok", f"{resp.status} {body}"
    except urllib.error.HTTPError as exc:
        return False, f"{exc.code} {exc.read(200).decode(errors='replace')}"
    except (OSError, ValueError) as exc:
        return False, str(exc)


def setup(pki: Path = PKI_DIR, server: str = APISERVER_URL, timeout: float = 180.0) -> None:
    """Wait for /readyz, then the extender's RBAC and the PodGroup CRD (established before any replica
    starts: replicas look for it once at start)."""
    deadline = time.monotonic() + timeout
    while not (answer := probe(f"{server}/readyz", pki))[0]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{server}/readyz not ok within {timeout:.0f}s: {answer[1]}")
        time.sleep(1)
    with kube_client(pki / "admin.kubeconfig") as http:
        print(f"applied {', '.join(apply_extender_rbac(http))}", flush=True)
        kube = Kube(http)
        if kube.get(f"{CRDS}/podgroups.scheduling.x-k8s.io") is None:
            install_podgroup_crd(kube)
        print("PodGroup CRD established", flush=True)


def wait_for_stop() -> None:
    """Block until SIGTERM or SIGINT (as PID 1 of a container, their default action would be ignored)."""
    wanted = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    signal.sigwait(wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.compose", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pki = commands.add_parser("pki", help="write the stack's certificates and kubeconfigs, then stay up")
    pki.add_argument("directory", type=Path, nargs="?", default=PKI_DIR)
    pki.add_argument("--owner", default="10001:10001", help="uid:gid of the image's user (default 10001:10001)")
    pki.add_argument("--exit", action="store_true", help="exit when done instead of staying up")
    run_setup = commands.add_parser("setup", help="RBAC and the PodGroup CRD once the API server is ready")
    run_setup.add_argument("--marker", type=Path, default=Path("/tmp/setup-done"))
    run_setup.add_argument("--exit", action="store_true", help="exit when done instead of staying up")
    commands.add_parser("idle", help="stay up until stopped (a container whose healthcheck probes another)")
    check = commands.add_parser("probe", help="exit 0 when URL answers 200 ok (and every --require file exists)")
    check.add_argument("url")
    check.add_argument("--require", type=Path, action="append", default=[])
    args = parser.parse_args(argv)

    if args.command == "probe":
        missing = [str(path) for path in args.require if not path.exists()]
        if missing:
            print(f"not yet: {', '.join(missing)}", file=sys.stderr)
            return 1
        healthy, detail = probe(args.url)
        print(f"{args.url}: {detail}", file=sys.stdout if healthy else sys.stderr)
        return 0 if healthy else 1
    if args.command == "idle":
        wait_for_stop()
        return 0
    if args.command == "pki":
        uid, _, gid = args.owner.partition(":")
        owner = (int(uid), int(gid or uid)) if os.geteuid() == 0 else None
        made = write_pki(args.directory, app_owner=owner)
        print(f"{'wrote' if made else 'kept'} the certificates and kubeconfigs in {args.directory}", flush=True)
    else:
        setup()
        args.marker.touch()
    if not args.exit:
        wait_for_stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
