"""SIGTERM drains the main listener before uvicorn's graceful shutdown closes its connections.

uvicorn's shutdown closes every idle keep-alive connection at once. A client that has just written a
call on one of them gets no answer, and kube-scheduler's Go transport does not resend a POST: every
rolling restart could fail a few scheduling attempts. While draining, the server keeps listening and
answering, but every answer carries ``Connection: close``, so each connection is retired by the
client after its next answer, never under a call. The drain ends when no connection is left open, when
``EXTENDER_SHUTDOWN_DRAIN_SECONDS`` have passed, or on a second SIGTERM or a SIGINT; then uvicorn's own
shutdown runs (the calls in flight finish, the lifespan ends, the signal is re-raised).
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from types import FrameType

import uvicorn

log = logging.getLogger("app")

CLOSE = (b"connection", b"close")


class DrainingServer(uvicorn.Server):
    """``uvicorn.Server`` whose first SIGTERM starts a drain of ``drain_seconds`` (0: no drain);
    ``on_drain`` is called once, from the event loop, when it starts."""

    def __init__(self, config: uvicorn.Config, drain_seconds: float, on_drain: Callable[[], None]) -> None:
        super().__init__(config)
        self.drain_seconds = drain_seconds
        self.on_drain = on_drain
        self.drain_began: float | None = None  # monotonic time of the SIGTERM that began the drain
        self._announced = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A signal handler: it only records; on_tick, in the event loop, does the rest.
        drain = sig == signal.SIGTERM and self.drain_seconds > 0 and self.drain_began is None and not self.should_exit
        super().handle_exit(sig, frame)  # records the signal, re-raised once the server has stopped
        if drain:
            self.should_exit = False
            self.drain_began = time.monotonic()

    async def on_tick(self, counter: int) -> bool:
        stop = await super().on_tick(counter)  # also rebuilds the default headers once a second
        if self.drain_began is None:
            return stop
        if not self._announced:
            self._announced = True
            self.on_drain()
            log.info(
                "SIGTERM: draining up to %g s; every answer closes its connection (a second SIGTERM stops now)",
                self.drain_seconds,
            )
        headers = self.server_state.default_headers
        if CLOSE not in headers:
            self.server_state.default_headers = [*headers, CLOSE]  # uvicorn closes after such an answer
        left = len(self.server_state.connections)
        drained_for = time.monotonic() - self.drain_began
        if stop or not left or drained_for >= self.drain_seconds:
            log.info("drain over after %.1f s, %d client connection(s) still open", drained_for, left)
            return True
        return False
