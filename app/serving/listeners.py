"""The listeners of ``python -m app``: the main port (HTTP, HTTPS or mutual TLS) and, optionally, a
plain-HTTP health port, both in one event loop with the certificate reloader.

Under mutual TLS every connection to the main port must present a client certificate, and a
kubelet's HTTP probe (or a Prometheus scrape without one) presents none. The health port serves
only /healthz, /readyz and /metrics of the same app state, without TLS, for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Generator

import uvicorn
import uvloop
from fastapi import FastAPI

from app.main import create_health_app
from app.serving.coalescing import CoalescingHttpToolsProtocol
from app.serving.draining import DrainingServer
from app.serving.tls import CertificateReloader, TLSFiles, harden
from app.settings import Settings, SettingsError, env_name
from app.state import AppState

HEALTH_PORT = env_name("health_port")

log = logging.getLogger("app")


def listen_socket(host: str, port: int, variable: str) -> socket.socket:
    """A bound, listening TCP socket, or SettingsError naming ``variable`` (bound here, not by uvicorn,
    so that a port in use is a one-line start-up error)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise SettingsError(f"{variable}={port}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


class _HealthServer(uvicorn.Server):
    """The health port's server: the main server handles the signals and stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _config(app: FastAPI, settings: Settings, **kwargs: object) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level=settings.log_level.lower(),
        log_config=None,  # configure_logging already routes uvicorn's loggers
        access_log=settings.access_log,
        # Above the client's idle timeout, so that the client, not the server, retires a connection: Go's
        # transport does not resend a POST the server closed the connection under.
        timeout_keep_alive=settings.http_keep_alive_seconds,
        loop="uvloop",
        http=CoalescingHttpToolsProtocol,  # httptools, each answer sent in one write
        **kwargs,  # type: ignore[arg-type]
    )


def serve(
    app: FastAPI, settings: Settings, host: str, port: int, tls: TLSFiles | None, health: socket.socket | None
) -> None:
    """Serve until SIGTERM (after the drain, ``app.serving.draining``) or SIGINT: uvicorn's graceful
    shutdown, then the signal is re-raised."""
    tls_options: dict[str, object] = {}
    if tls is not None:
        tls_options = {
            "ssl_certfile": tls.cert_file,
            "ssl_keyfile": tls.key_file,
            "ssl_ca_certs": tls.client_ca_file,
            # Mutual TLS: no client certificate (or one the CA did not sign), no handshake.
            "ssl_cert_reqs": ssl.CERT_REQUIRED if tls.mutual else ssl.CERT_NONE,
            "ssl_ciphers": None,  # keep the ssl module's secure default cipher list
        }
    main_config = _config(app, settings, host=host, port=port, **tls_options)
    main_config.load()  # builds the SSL context now, so the reloader holds the one the listener uses
    reloader: CertificateReloader | None = None
    if tls is not None:
        assert main_config.ssl is not None
        harden(main_config.ssl)
        reloader = CertificateReloader(main_config.ssl, tls, settings.tls_reload_interval_seconds)
    state: AppState = app.state.extender

    def draining() -> None:
        state.draining = True

    main_server = DrainingServer(main_config, settings.shutdown_drain_seconds, draining)
    health_server = (
        _HealthServer(_config(create_health_app(app), settings, lifespan="off")) if health is not None else None
    )

    async def run() -> None:
        if health is not None:
            address = health.getsockname()
            log.info("health port: /healthz, /readyz and /metrics on http://%s:%d", address[0], address[1])
        reloading = asyncio.create_task(reloader.run(), name="tls-reloader") if reloader is not None else None
        health_serving = (
            asyncio.create_task(health_server.serve(sockets=[health]), name="health-port")
            if health_server is not None and health is not None
            else None
        )
        try:
            await main_server.serve()
        finally:
            if reloading is not None:
                reloading.cancel()
            if health_server is not None:
                health_server.should_exit = True
            await asyncio.gather(*(t for t in (reloading, health_serving) if t is not None), return_exceptions=True)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())
