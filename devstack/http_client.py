"""HTTP calls for tests, benchmarks and the dev stack, sharing one trust store per process.

httpx reads the whole CA bundle again (40-80 ms of CPU here) for every ``httpx.get`` or ``Client``
made without an SSL context; loops polling a replica every few milliseconds spent most of a core
on it, starving the control plane they were waiting for."""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx


@functools.cache
def trust() -> ssl.SSLContext:
    """httpx's default verification (``SSL_CERT_FILE`` and the rest honoured), built once."""
    return httpx.create_ssl_context()


def get(url: str, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("verify", trust())
    return httpx.get(url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("verify", trust())
    return httpx.post(url, **kwargs)


def client(**kwargs: Any) -> httpx.Client:
    kwargs.setdefault("verify", trust())
    return httpx.Client(**kwargs)
