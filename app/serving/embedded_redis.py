"""Start a private redis-server on a free loopback port: the zero-configuration default.

Used by ``python -m app`` when no Redis (URL or Sentinel) is configured and no Kubernetes API is (see
``embedded_redis_refusal``), and by the test suite. Persistence is off; the data lives as long as
the process.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.settings import Settings

_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


class EmbeddedRedisError(RuntimeError):
    pass


class _PortTaken(Exception):
    """redis-server could not bind its port: another process took it after free_port() found it free."""


_BIND_ATTEMPTS = 3


def die_with_parent() -> None:
    """In the child before exec: let the kernel stop redis-server if its parent dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass  # best effort: stop() still ends it on a clean exit


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL when it has not exited within ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def find_redis_server() -> str:
    path = os.environ.get("EXTENDER_REDIS_SERVER_BIN") or shutil.which("redis-server")
    if not path:
        raise EmbeddedRedisError(
            "no Redis URL is configured (EXTENDER_REDIS_URL) and no redis-server binary is on PATH; "
            "install one (apt-get install redis-server) or point EXTENDER_REDIS_URL at a server"
        )
    return path


def _kube_api_source(settings: Settings) -> str | None:
    """What configures a Kubernetes API for this process, or None when none is."""
    from extenders.kube.config import SERVICE_ACCOUNT_DIR, KubeConfigError, find_kubeconfig

    if settings.kube_mode == "off":
        return None
    if settings.kube_mode == "on":
        return "EXTENDER_KUBE_MODE=on"
    if settings.kube_url:
        return "EXTENDER_KUBE_URL is set"
    try:
        if find_kubeconfig() is None:
            return None
    except KubeConfigError:  # present but broken: a cluster was meant all the same
        pass
    if os.environ.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT_DIR / "token").is_file():
        return "EXTENDER_KUBE_MODE=auto found the pod's service account"
    return f"EXTENDER_KUBE_MODE=auto found the kubeconfig {os.environ.get('KUBECONFIG') or '~/.kube/config'}"


def embedded_redis_refusal(settings: Settings) -> str | None:
    """Why a private Redis must not be started, or None when it may.

    Replicas share their state through one Redis; a replica that starts its own beside a cluster
    (its EXTENDER_REDIS_URL forgotten or misspelt) would lead its own watch and place pods on
    capacity the others also count. So with a Kubernetes API configured it is refused unless asked
    for (EXTENDER_EMBEDDED_REDIS=true, for one local replica against a test cluster)."""
    if settings.redis_configured or settings.embedded_redis:
        return None
    source = _kube_api_source(settings)
    if source is None:
        return None
    return (
        f"EXTENDER_REDIS_URL is not set and a Kubernetes API is configured ({source}): a private Redis per "
        "replica would split the shared state; set EXTENDER_REDIS_URL to the replicas' Redis (or "
        "EXTENDER_REDIS_SENTINELS and EXTENDER_REDIS_SENTINEL_MASTER), or EXTENDER_EMBEDDED_REDIS=true to "
        "run one replica on a private Redis anyway"
    )


class EmbeddedRedis:
    """A redis-server child process; ``url`` is valid between start() and stop()."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._port_chosen = port is None  # a port picked here may be taken before redis-server binds it
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        binary = find_redis_server()
        self._dir = tempfile.TemporaryDirectory(prefix="extender-redis-")
        attempts_left = _BIND_ATTEMPTS if self._port_chosen else 1
        while True:
            attempts_left -= 1
            try:
                return self._run(binary, timeout)
            except _PortTaken as exc:
                if attempts_left == 0:
                    self.stop()
                    raise EmbeddedRedisError(f"redis-server exited at start: {exc}") from None
            self.port = free_port()

    def _run(self, binary: str, timeout: float) -> EmbeddedRedis:
        assert self._dir is not None
        log = Path(self._dir.name) / "redis.log"
        args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self._dir.name,
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--loglevel",
            "warning",
            "--logfile",
            str(log),
        ]
        self._proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                # Its last lines say why; the first ones are its banner.
                err = " / ".join(log.read_text(errors="replace").splitlines()[-2:]) if log.exists() else ""
                self._proc = None
                if "Address already in use" in err:
                    raise _PortTaken(err)
                self.stop()
                raise EmbeddedRedisError(f"redis-server exited at start: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise EmbeddedRedisError(f"redis-server did not answer on port {self.port} within {timeout}s")

    @property
    def pid(self) -> int:
        """The redis-server's process id (0 when not running)."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else 0

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, 5)
        self._proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
