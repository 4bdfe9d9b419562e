"""uvicorn's httptools protocol, with a response's head and body sent in one write.

uvicorn writes a response's status line and headers as soon as the app sends ``http.response.start``,
and the body with ``http.response.body``: two sends on the socket, each waking the client (kube-scheduler)
for a partial response. Holding the head until the body's write sends each answer in one piece: half
the send calls here, half the wake-ups on the caller's side. A body that does not follow within the
same step of the event loop (a streamed response) lets the head go at the end of that step; the body
itself is never held, so nothing scheduled after the answer (prioritize-ahead) delays it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingTransport:
    """A transport that holds a response head until the next write, or the end of the loop's step."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held:
            self._held.append(bytes(data))
            self.flush()
        elif data[:5] == b"HTTP/" and data[-4:] == b"\r\n\r\n":
            self._held.append(bytes(data))
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        if not self._held:
            return
        data = b"".join(self._held) if len(self._held) > 1 else self._held[0]
        self._held.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._held))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` writing through a ``CoalescingTransport``."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
