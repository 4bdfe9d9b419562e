"""A TCP load balancer on loopback standing in for a Kubernetes Service in front of the replicas.

Each new connection goes to the next backend in turn; a backend that refuses is skipped (as
endpoints drop a pod that is gone), so killing a replica leaves the others serving. Tests may pin
new connections to one backend and drop the clients' connections, to know where a client's next
calls go. It runs on its own event loop in a thread of the calling process.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Sequence

from app.serving.embedded_redis import free_port


class Balancer:
    def __init__(self, backends: Sequence[tuple[str, int]]) -> None:
        self.backends = list(backends)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections: dict[int, int] = {}  # backend port -> connections made
        self.sent: dict[int, int] = {}  # backend port -> bytes forwarded to it (clients' requests)
        self._turn = itertools.count()
        self._pinned: int | None = None  # index of the only backend new connections go to, when set
        self._clients: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._run, name=f"balancer-{self.port}", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("balancer did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()

    async def _connect(self) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
        start = next(self._turn) if self._pinned is None else self._pinned
        last: Exception | None = None
        for i in range(len(self.backends) if self._pinned is None else 1):
            host, port = self.backends[(start + i) % len(self.backends)]
            try:
                streams = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=2)
            except (OSError, TimeoutError) as exc:
                last = exc
                continue
            self.connections[port] = self.connections.get(port, 0) + 1
            return (port, *streams)
        raise ConnectionRefusedError(f"no backend accepts connections: {last}")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            backend, up_reader, up_writer = await self._connect()
        except OSError:
            writer.close()
            return
        self._clients.add(writer)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, upstream: bool) -> None:
            try:
                while data := await src.read(65536):
                    if upstream:
                        self.sent[backend] = self.sent.get(backend, 0) + len(data)
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                # Either side closing closes both, as a dead backend resets the client's connection.
                with contextlib.suppress(OSError):
                    dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
        finally:
            self._clients.discard(writer)

    def pin(self, port: int | None) -> None:
        """Send every new connection to the backend on ``port`` only (if it refuses, the client's
        connection is closed); ``None`` goes back to taking turns."""
        index = None if port is None else [p for _, p in self.backends].index(port)
        self._loop.call_soon_threadsafe(setattr, self, "_pinned", index)

    def drop_clients(self) -> None:
        """Close every client connection, so a client opens new ones (through the pin, when set).
        Only safe while the client has no call in flight, as a server closing idle keep-alives."""

        async def _drop() -> None:
            for writer in list(self._clients):
                writer.close()

        asyncio.run_coroutine_threadsafe(_drop(), self._loop).result(5)

    def stop(self) -> None:
        async def _close() -> None:
            if self._server is not None:
                self._server.close()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(_close(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
