"""``python -m app``: run one replica; with no Redis and no Kubernetes API configured, start a private Redis.

HTTPS, mutual TLS and the plain-HTTP health port come from settings (see app.serving).
"""

from __future__ import annotations

import argparse
import gc
import logging
import signal
import sys
from importlib.metadata import PackageNotFoundError, version

from app.serving.embedded_redis import EmbeddedRedis, EmbeddedRedisError, embedded_redis_refusal
from app.serving.logging_config import configure_logging
from app.serving.tls import tls_files
from app.settings import Settings, SettingsError, env_name, load_settings, parse_gc_thresholds
from extenders.sync.redis_connect import cluster_refusal


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _version() -> str:
    try:
        return version("kube-gang-extender")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _settings_help() -> str:
    """Every setting with its default, for ``--help``."""
    lines = ["settings (environment variables):"]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            default = "(per process)"
        else:
            default = "unset" if field.default is None else repr(field.default)
        lines.append(f"  {env_name(name):<40} default {default}")
        if field.description:
            lines.append(f"      {field.description}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app",
        description="Run one extender replica.",
        epilog=_settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8888, help="port to listen on (default 8888)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    args = parser.parse_args(argv)

    try:
        settings = load_settings()
        tls = tls_files(settings)  # missing, unreadable or mismatched files stop here, naming the setting
        if settings.health_port is not None and settings.health_port == args.port:
            raise SettingsError(f"EXTENDER_HEALTH_PORT={settings.health_port}: the same port as --port")
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    refusal = embedded_redis_refusal(settings)
    if refusal is None and settings.redis_configured:
        # Checked once more on every new connection; here it stops the start when Redis answers now.
        refusal = cluster_refusal(settings.redis_target(), timeout=min(1.0, settings.redis_timeout_seconds))
    if refusal is None and not settings.redis_configured and settings.redis_min_replicas_ack:
        refusal = (
            f"{env_name('redis_min_replicas_ack')}={settings.redis_min_replicas_ack} but no Redis is configured: "
            "the private redis-server has no replicas, so every bind would fail"
        )
    if refusal is not None:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format, settings.replica_id)
    log = logging.getLogger("app")
    if tls is not None and tls.mutual and settings.health_port is None:
        log.warning(
            "mutual TLS without EXTENDER_HEALTH_PORT: probes must present a client certificate "
            "(an HTTP probe cannot); see the README's Security section"
        )
    embedded: EmbeddedRedis | None = None
    if not settings.redis_configured:
        try:
            embedded = EmbeddedRedis().start()
        except EmbeddedRedisError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        settings.redis_url = embedded.url
        log.info("no EXTENDER_REDIS_URL: started an embedded redis-server at %s", embedded.url)
    # uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown; turning that into SystemExit
    # lets the finally below stop the embedded Redis instead of the process dying first.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        # Imported late: a policy error should come after logging is set.
        from app.main import create_app
        from app.serving.listeners import HEALTH_PORT, listen_socket, serve

        try:
            application = create_app(settings, redis_embedded=embedded is not None)
            health = listen_socket(args.host, settings.health_port, HEALTH_PORT) if settings.health_port else None
        except (ValueError, OSError) as exc:  # SettingsError is a ValueError
            print(f"error: {exc}", file=sys.stderr)
            return 2
        # Process-wide, so set here rather than per app (tests build several apps in one process).
        gc.set_threshold(*parse_gc_thresholds(settings.gc_thresholds))
        serve(application, settings, args.host, args.port, tls, health)
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
