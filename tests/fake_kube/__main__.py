"""``python -m tests.fake_kube --port N``: run the fake kube-apiserver on 127.0.0.1.

With ``--tls-cert/--tls-key`` it serves https; ``--client-ca`` then also requires a client
certificate signed by that CA (kube-apiserver's ``--client-ca-file``), checked in the handshake.
"""

from __future__ import annotations

import argparse
import ssl
from typing import Any

import uvicorn

from .server import FakeConfig, create_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fake_kube", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default=None, help="require this bearer token on API requests")
    parser.add_argument("--no-podgroups", action="store_true", help="serve without the PodGroup CRD (404s)")
    parser.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between BOOKMARKs")
    parser.add_argument("--history", type=int, default=1000, help="watch events kept per resource")
    parser.add_argument("--tls-cert", default=None, help="serve https with this PEM certificate (chain)")
    parser.add_argument("--tls-key", default=None, help="the PEM private key of --tls-cert")
    parser.add_argument("--client-ca", default=None, help="require client certificates signed by this PEM CA")
    args = parser.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        parser.error("--client-ca needs --tls-cert/--tls-key")
    config = FakeConfig(
        token=args.token,
        podgroups=not args.no_podgroups,
        bookmark_interval=args.bookmark_interval,
        history_limit=args.history,
    )
    tls: dict[str, Any] = {}
    if args.tls_cert:
        tls = {"ssl_certfile": args.tls_cert, "ssl_keyfile": args.tls_key}
    if args.client_ca:
        tls.update(ssl_ca_certs=args.client_ca, ssl_cert_reqs=ssl.CERT_REQUIRED)
    uvicorn.run(
        create_app(config),
        host=args.host,
        port=args.port,
        log_level="warning",
        timeout_graceful_shutdown=1,  # open watch streams must not hold up a stop
        **tls,
    )


if __name__ == "__main__":
    main()
