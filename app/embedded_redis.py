"""Start a private redis-server on a free loopback port: the zero-configuration default.

Used by ``python -m app`` when no Redis URL is configured, and by the test suite.
Persistence is off; the data lives as long as the process.
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
from types import TracebackType

_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


class EmbeddedRedisError(RuntimeError):
    pass


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


def find_redis_server() -> str:
    path = os.environ.get("EXTENDER_REDIS_SERVER_BIN") or shutil.which("redis-server")
    if not path:
        raise EmbeddedRedisError(
            "no Redis URL is configured (EXTENDER_REDIS_URL) and no redis-server binary is on PATH; "
            "install one (apt-get install redis-server) or point EXTENDER_REDIS_URL at a server"
        )
    return path


class EmbeddedRedis:
    """A redis-server child process; ``url`` is valid between start() and stop()."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        binary = find_redis_server()
        self._dir = tempfile.TemporaryDirectory(prefix="extender-redis-")
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
        ]
        self._proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=die_with_parent
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                raise EmbeddedRedisError(f"redis-server exited at start: {err.strip()}")
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
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
