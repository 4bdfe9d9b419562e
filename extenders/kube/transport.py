"""The wire under our ``httpx.AsyncClient``: aiohttp's connection pool by default, httpx's own on request.

A released gang creates its Bindings all at once. Measured on the gang benchmark, httpx's default
transport (httpcore on anyio) spent about 2 ms of CPU per request in a replica, half of the
whole release; the same requests through aiohttp's pool (C-accelerated parser, one write per
request) cost a third of that. httpx stays the client API (auth flows, timeouts, responses);
only the connection handling changes, through the httpx-aiohttp transport.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Literal

import aiohttp
import httpx
import yarl
from httpx_aiohttp import AiohttpTransport

TransportKind = Literal["aiohttp", "httpx"]
TRANSPORTS: tuple[TransportKind, ...] = ("aiohttp", "httpx")

# Idle connections are kept 30 s (httpx's default is 5 s), so a gang released after a quiet spell
# reuses warm connections instead of opening one per member (with TLS, a handshake each).
KEEPALIVE_SECONDS = 30.0
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=32, keepalive_expiry=KEEPALIVE_SECONDS)


# Most specific first: aiohttp's connector errors derive from its OS errors, and its proxy and
# certificate errors from its connector errors.
_CLASSES: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (TimeoutError, httpx.TimeoutException),
    (aiohttp.ClientProxyConnectionError, httpx.ProxyError),
    (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, DNS, TLS verification
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.ReadError),
    (aiohttp.ClientOSError, httpx.ReadError),  # reset mid-exchange
)


def _httpx_error(exc: BaseException) -> httpx.TransportError:
    """The httpx error for an aiohttp failure, of the class httpx's own transport would raise.

    httpx-aiohttp's table turns every connection error (refused, bad certificate, reset) into a
    ConnectTimeout; callers and logs must be able to tell a timeout from a refusal.
    """
    for source, target in _CLASSES:
        if isinstance(exc, source):
            return target(str(exc) or type(exc).__name__)
    return httpx.TransportError(str(exc) or type(exc).__name__)


def _aiohttp_cause(exc: BaseException) -> BaseException | None:
    """The aiohttp failure behind ``exc``: itself, or the cause httpx-aiohttp wrapped."""
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, aiohttp.ClientError | TimeoutError):
            return candidate
    return None


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    """Re-raise aiohttp failures (raw, or as httpx-aiohttp mapped them) as the right httpx error."""
    try:
        yield
    except (aiohttp.ClientError, TimeoutError, httpx.TransportError) as exc:
        cause = _aiohttp_cause(exc)
        if cause is None:
            raise
        raise _httpx_error(cause) from cause


class _MappedStream(httpx.AsyncByteStream):
    """A response body whose read errors are always httpx errors (a watch may break mid-stream)."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for chunk in self._inner:
                yield chunk

    async def aclose(self) -> None:
        with _as_httpx_errors():
            await self._inner.aclose()


class AiohttpKubeTransport(AiohttpTransport):
    """httpx-aiohttp's transport, with every aiohttp error surfacing as the ``httpx.TransportError``
    httpx's own transport would raise for it."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with _as_httpx_errors():
            response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _MappedStream(response.stream)
        return response

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: httpx.Timeout
    ) -> tuple[int, bytes]:
        """POST ``body`` to ``url`` (already encoded: sent as it is) through the same pool, without
        httpx's request and response objects; the status and the whole answer. Failures are httpx errors.
        """
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
        limits = aiohttp.ClientTimeout(sock_connect=timeout.connect, sock_read=timeout.read, connect=timeout.pool)
        with _as_httpx_errors():
            async with self.client.post(
                yarl.URL(url, encoded=True),
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=limits,
                proxy=str(self.proxy.url) if self.proxy else None,
            ) as response:
                return response.status, await response.read()


def build_transport(kind: str, verify: ssl.SSLContext | bool = True) -> httpx.AsyncBaseTransport:
    """The transport for ``kind`` ("aiohttp" or "httpx"), verifying TLS with ``verify``."""
    if kind == "aiohttp":
        return AiohttpKubeTransport(verify=verify, limits=LIMITS)
    if kind == "httpx":
        return httpx.AsyncHTTPTransport(verify=verify, limits=LIMITS)
    raise ValueError(f"kube transport must be one of {', '.join(TRANSPORTS)}, got {kind!r}")
