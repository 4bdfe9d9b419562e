"""What the transport tests check with: kubeconfig parts, the class of a failure, watch events."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from typing import Any

import aiohttp
import httpx
import trustme

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"


def cluster_of(config: dict[str, Any]) -> dict[str, Any]:
    cluster: dict[str, Any] = config["clusters"][0]["cluster"]
    return cluster


def user_of(config: dict[str, Any]) -> dict[str, Any]:
    user: dict[str, Any] = config["users"][0]["user"]
    return user


def b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode("ascii")


def assert_httpx_error(exc: Exception) -> None:
    """An httpx error, not an aiohttp/ssl/OS exception leaking through the transport."""
    assert isinstance(exc, httpx.HTTPError), f"{type(exc).__module__}.{type(exc).__name__} is not an httpx error"
    assert type(exc).__module__.split(".")[0] == "httpx", f"{type(exc)} does not come from httpx"
    assert not isinstance(exc, aiohttp.ClientError | ssl.SSLError | OSError), f"{type(exc).__mro__} leaks"


async def raised_by(call: Awaitable[Any]) -> Exception:
    """The exception ``call`` raises (failing the test if it returns)."""
    try:
        result = await call
    except Exception as exc:  # the class is what the tests assert on
        return exc
    raise AssertionError(f"expected an exception, got {result!r}")


async def next_event(events: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """The next non-BOOKMARK watch event (fails after 5 s)."""
    while True:
        event = await asyncio.wait_for(anext(events), 5.0)
        if event["type"] != "BOOKMARK":
            return event


async def close(events: AsyncIterator[dict[str, Any]]) -> None:
    if isinstance(events, AsyncGenerator):
        await events.aclose()


async def drain(events: AsyncIterator[dict[str, Any]]) -> list[str]:
    return [event["type"] async for event in events]


def no_client_cert(config: dict[str, Any]) -> None:
    """A kubeconfig edit: the user has no client certificate."""
    user_of(config).clear()


def untrusted_client_cert(config: dict[str, Any]) -> None:
    """A kubeconfig edit: the user's client certificate is signed by a CA the server does not trust."""
    stranger = trustme.CA().issue_cert(common_name="stranger")
    user_of(config)["client-certificate-data"] = b64(b"".join(b.bytes() for b in stranger.cert_chain_pems))
    user_of(config)["client-key-data"] = b64(stranger.private_key_pem.bytes())
