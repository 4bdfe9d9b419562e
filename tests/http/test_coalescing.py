"""A response's head and body leave as one send (app.serving.coalescing)."""

from __future__ import annotations

import asyncio
from typing import Any

from app.serving.coalescing import CoalescingTransport


class Recording:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closing = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.aborted = self.closing = True

    def get_write_buffer_size(self) -> int:
        return sum(map(len, self.sent))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


async def test_the_head_waits_for_the_body_and_both_leave_in_one_send() -> None:
    inner = Recording()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(HEAD)
    assert inner.sent == [] and transport.get_write_buffer_size() == len(HEAD)
    transport.write(memoryview(b"{}"))
    assert inner.sent == [HEAD + b"{}"]  # at once: nothing later in the step delays the answer
    transport.write(b"more body")
    assert inner.sent[1:] == [b"more body"]  # anything but a head goes straight through
    await asyncio.sleep(0)
    assert len(inner.sent) == 2
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest passes through


async def test_a_head_whose_body_comes_later_leaves_when_the_step_ends() -> None:
    inner = Recording()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(HEAD)
    await asyncio.sleep(0)
    assert inner.sent == [HEAD]
    transport.write(b"{}")
    assert inner.sent == [HEAD, b"{}"]


async def test_close_sends_what_is_held_and_abort_drops_it() -> None:
    inner = Recording()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(HEAD)
    transport.close()
    assert inner.sent == [HEAD] and inner.closing
    await asyncio.sleep(0)
    assert inner.sent == [HEAD]  # nothing twice
    other = Recording()
    transport = CoalescingTransport(other, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(HEAD)
    transport.abort()
    await asyncio.sleep(0)
    assert other.sent == [] and other.aborted


async def test_nothing_is_written_to_a_transport_closed_meanwhile() -> None:
    inner = Recording()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
    transport.write(HEAD)
    inner.closing = True  # the peer went away before the step ended
    await asyncio.sleep(0)
    assert inner.sent == []
