"""Mutual TLS between kube-scheduler and the replicas, set up as the README's Security section says.

The replicas serve a certificate signed by the cluster CA (kube-scheduler's ``tlsConfig.caFile``
trusts it) and require client certificates from a CA of their own, dedicated to the extender's
callers: the cluster CA also signs every kubelet's and user's client certificate, and none of
those may call ``/bind``. kube-scheduler presents a certificate of that dedicated CA
(``tlsConfig.certFile``/``keyFile``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trustme

from devstack.controlplane import ControlPlane


def _write_leaf(leaf: trustme.LeafCert, cert: Path, key: Path) -> tuple[Path, Path]:
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
    return cert, key


@dataclass(frozen=True)
class MutualTLS:
    cert_file: Path  # the replicas' serving pair, signed by the cluster CA, for 127.0.0.1 and localhost
    key_file: Path
    server_ca_file: Path  # what callers trust: the cluster CA
    client_ca_file: Path  # the dedicated CA the replicas require client certificates from
    client_cert_file: Path  # kube-scheduler's (and the tests') client certificate, signed by it
    client_key_file: Path
    client_ca: trustme.CA  # to issue more client certificates (tests)

    @classmethod
    def issue(cls, plane: ControlPlane, directory: Path) -> MutualTLS:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = plane.issue_server_cert(directory, "127.0.0.1", "localhost")
        client_ca = trustme.CA(organization_name="kube-gang-extender callers")
        client_ca_file = directory / "extender-client-ca.crt"
        client_ca_file.write_bytes(client_ca.cert_pem.bytes())
        client_cert, client_key = _write_leaf(
            client_ca.issue_cert(common_name="kube-scheduler"),
            directory / "kube-scheduler-client.crt",
            directory / "kube-scheduler-client.key",
        )
        return cls(cert, key, plane.ca_file, client_ca_file, client_cert, client_key, client_ca)

    def replica_env(self) -> dict[str, str]:
        """The replicas' settings: HTTPS with the pair, client certificates required."""
        return {
            "EXTENDER_TLS_CERT_FILE": str(self.cert_file),
            "EXTENDER_TLS_KEY_FILE": str(self.key_file),
            "EXTENDER_TLS_CLIENT_CA_FILE": str(self.client_ca_file),
        }

    def scheduler_tls_config(self) -> dict[str, Any]:
        """kube-scheduler's extender ``tlsConfig`` (with ``enableHTTPS: true``)."""
        return {
            "caFile": str(self.server_ca_file),
            "certFile": str(self.client_cert_file),
            "keyFile": str(self.client_key_file),
        }

    def client_context(self, with_certificate: bool = True) -> ssl.SSLContext:
        """What a caller uses: trust the cluster CA and (``with_certificate``) present the client certificate."""
        context = ssl.create_default_context(cafile=str(self.server_ca_file))
        if with_certificate:
            context.load_cert_chain(str(self.client_cert_file), str(self.client_key_file))
        return context
