"""``python -m app``: run one replica; with no Redis configured, start a private one."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from importlib.metadata import PackageNotFoundError, version

import uvicorn

from app.embedded_redis import EmbeddedRedis, EmbeddedRedisError
from app.logging_config import configure_logging
from app.settings import SettingsError, load_settings, settings_help


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _version() -> str:
    try:
        return version("kube-gang-extender")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app",
        description="Run one extender replica.",
        epilog=settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8888, help="port to listen on (default 8888)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    args = parser.parse_args(argv)

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format, settings.replica_id)
    log = logging.getLogger("app")
    embedded: EmbeddedRedis | None = None
    if not settings.redis_url:
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
        from app.main import create_app  # imported late: a policy error should come after logging is set

        try:
            application = create_app(settings)
        except (ValueError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        uvicorn.run(
            application,
            host=args.host,
            port=args.port,
            log_level=settings.log_level.lower(),
            log_config=None,  # configure_logging already routes uvicorn's loggers
            access_log=settings.access_log,
            loop="uvloop",
            http="httptools",
        )
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
