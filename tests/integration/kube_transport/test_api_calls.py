"""Both kube transports (aiohttp's pool and httpx's own) against the fake API server: the same answers to
the API calls, the transport asked for in use, and failures only as httpx errors (over TLS: test_tls.py).

Callers (KubeClient.bind_pod, the watcher) catch ``httpx.HTTPError``; an aiohttp or ssl exception
leaking through the aiohttp transport would escape them, so every failure path here checks the class.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from app.serving.embedded_redis import free_port
from extenders.kube.client import BindStatus
from extenders.kube.config import KubeConfigError, build_http_client
from extenders.kube.transport import AiohttpKubeTransport
from tests.fake_kube.builders import make_node, make_pod
from tests.integration.kube_transport.support import (
    NODES,
    assert_httpx_error,
    b64,
    close,
    cluster_of,
    drain,
    next_event,
    no_client_cert,
    raised_by,
)
from tests.plugins.fake_kube import FakeKube, MakeKube, StartFakeKube

pytestmark = pytest.mark.integration

# -- plain HTTP + token: the API calls ----------------------------------------------------------------


async def test_list_pages_and_get(plain: FakeKube, make_kube: MakeKube, transport: str) -> None:
    ns = f"list-{transport}"
    for i in range(5):
        plain.client.create(make_pod(f"p{i}", namespace=ns))
    kube = make_kube(kubeconfig=str(plain.kubeconfig_path), page_size=2)
    lists_before = plain.requests("list", "pods")

    listed = await kube.list(f"/api/v1/namespaces/{ns}/pods")

    assert sorted(p["metadata"]["name"] for p in listed.items) == [f"p{i}" for i in range(5)]
    assert plain.requests("list", "pods") - lists_before == 3, "5 pods at 2 per page are 3 requests"
    assert int(listed.resource_version) >= max(int(p["metadata"]["resourceVersion"]) for p in listed.items)
    pod = await kube.get_pod(ns, "p3")
    assert pod is not None and pod["metadata"]["name"] == "p3" and pod["metadata"]["namespace"] == ns
    assert await kube.get_pod(ns, "absent") is None


async def test_bind_outcomes(plain: FakeKube, make_kube: MakeKube, transport: str) -> None:
    ns = f"bind-{transport}"
    web = plain.client.create(make_pod("web", namespace=ns))
    other = plain.client.create(make_pod("other", namespace=ns))
    kube = make_kube(url=plain.url, token=plain.token)  # the URL + token path, no kubeconfig
    uid = web["metadata"]["uid"]

    bound = await kube.bind_pod(ns, "web", uid, "n1")
    assert (bound.status, bound.node) == (BindStatus.BOUND, "n1")
    assert plain.client.get("Pod", "web", ns)["spec"]["nodeName"] == "n1"
    retry = await kube.bind_pod(ns, "web", uid, "n1")
    assert (retry.status, retry.node, retry.ok) == (BindStatus.ALREADY_BOUND, "n1", True)
    elsewhere = await kube.bind_pod(ns, "web", uid, "n2")
    assert (elsewhere.status, elsewhere.node, elsewhere.ok) == (BindStatus.BOUND_ELSEWHERE, "n1", False)
    missing = await kube.bind_pod(ns, "ghost", "uid-ghost", "n1")
    assert missing.status is BindStatus.NOT_FOUND
    replaced = await kube.bind_pod(ns, "other", "not-" + other["metadata"]["uid"], "n1")
    assert replaced.status is BindStatus.UID_MISMATCH, replaced
    assert plain.client.get("Pod", "other", ns)["spec"].get("nodeName") in (None, "")


async def test_watch_sees_added_then_modified(plain: FakeKube, make_kube: MakeKube, transport: str) -> None:
    ns = f"watch-{transport}"
    kube = make_kube(kubeconfig=str(plain.kubeconfig_path))
    start = await kube.list(f"/api/v1/namespaces/{ns}/pods")
    plain.client.create(make_pod("w", namespace=ns))
    events = kube.watch(f"/api/v1/namespaces/{ns}/pods", start.resource_version, timeout_seconds=30)
    try:
        added = await next_event(events)  # replayed from history: the watch is registered now
        plain.client.patch("Pod", "w", {"metadata": {"labels": {"seen": "live"}}}, namespace=ns)
        modified = await next_event(events)  # streamed while the watch is open
    finally:
        await close(events)
    assert (added["type"], added["object"]["metadata"]["name"]) == ("ADDED", "w")
    assert modified["type"] == "MODIFIED"
    assert modified["object"]["metadata"]["labels"] == {"seen": "live"}
    assert int(modified["object"]["metadata"]["resourceVersion"]) > int(added["object"]["metadata"]["resourceVersion"])


# -- failures as httpx errors -------------------------------------------------------------------------


async def test_connection_refused(make_kube: MakeKube) -> None:
    kube = make_kube(url=f"http://127.0.0.1:{free_port()}", token="t")  # nothing listens there

    assert_httpx_error(await raised_by(kube.get(f"{NODES}/n1")))
    assert_httpx_error(await raised_by(kube.list(NODES)))
    result = await kube.bind_pod("default", "web", "uid", "n1")
    assert result.status is BindStatus.ERROR and not result.ok


async def test_read_timeout(plain: FakeKube, make_kube: MakeKube) -> None:
    kube = make_kube(kubeconfig=str(plain.kubeconfig_path))
    kube.http.timeout = httpx.Timeout(0.2)
    plain.client.set_latency(1.0)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        exc = await raised_by(kube.get(f"{NODES}/n1"))
        elapsed = loop.time() - started
        result = await kube.bind_pod("default", "web", "uid", "n1")
    finally:
        plain.client.set_latency(0.0)
    assert isinstance(exc, httpx.TimeoutException), f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    assert isinstance(exc, httpx.ReadTimeout), f"the request was sent; only the answer was late: {type(exc)}"
    assert_httpx_error(exc)
    assert elapsed < 0.9, f"the 0.2 s timeout was not applied ({elapsed:.2f} s)"
    assert result.status is BindStatus.ERROR and "Timeout" in result.message, result


async def test_stalled_stream_body_times_out(plain: FakeKube, make_kube: MakeKube) -> None:
    """A watch body that stops arriving: the per-request read timeout fires mid-stream, as httpx's."""
    kube = make_kube(kubeconfig=str(plain.kubeconfig_path))
    lines: list[str] = []

    async def read() -> None:
        params = {"watch": "1", "resourceVersion": str(plain.stats()["resourceVersion"])}
        async with kube.http.stream("GET", NODES, params=params, timeout=httpx.Timeout(5.0, read=0.3)) as resp:
            assert resp.status_code == 200
            lines.extend([line async for line in resp.aiter_lines()])

    exc = await raised_by(read())

    assert isinstance(exc, httpx.ReadTimeout), f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    assert_httpx_error(exc)
    assert lines == []


async def test_watch_broken_by_server(plain: FakeKube, make_kube: MakeKube, transport: str) -> None:
    ns = f"broken-{transport}"
    kube = make_kube(kubeconfig=str(plain.kubeconfig_path))
    plain.client.create(make_pod("b", namespace=ns))
    events = kube.watch(f"/api/v1/namespaces/{ns}/pods", "0", timeout_seconds=60)
    try:
        assert (await next_event(events))["type"] == "ADDED"
        assert plain.break_watches("pods") >= 1
        try:
            rest = await asyncio.wait_for(drain(events), 5.0)
        except TimeoutError:
            raise AssertionError("the watch did not end after the server closed it") from None
        except Exception as exc:  # a broken stream may raise, but only as httpx
            assert_httpx_error(exc)
        else:
            assert set(rest) <= {"BOOKMARK"}, rest
    finally:
        await close(events)


async def test_watch_connection_dropped(fake_kube_factory: StartFakeKube, make_kube: MakeKube) -> None:
    """The server process dies mid-stream (incomplete chunked body): an httpx error, not aiohttp's."""
    server = fake_kube_factory()
    server.client.create(make_node("n1"))
    kube = make_kube(kubeconfig=str(server.kubeconfig_path))
    events = kube.watch(NODES, "0", timeout_seconds=60)
    try:
        assert (await next_event(events))["type"] == "ADDED"
        server.proc.kill()
        server.proc.wait()
        exc = await raised_by(asyncio.wait_for(drain(events), 5.0))
    finally:
        await close(events)
    assert not isinstance(exc, TimeoutError), "the watch hung on a dead connection"
    assert isinstance(exc, httpx.TransportError), f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    assert_httpx_error(exc)


# -- the transport asked for is the one in use --------------------------------------------------------


async def test_transport_in_use(plain: FakeKube, tls_token: FakeKube, make_kube: MakeKube, transport: str) -> None:
    expected = AiohttpKubeTransport if transport == "aiohttp" else httpx.AsyncHTTPTransport
    for kube in (
        make_kube(url=plain.url, token=plain.token),
        make_kube(kubeconfig=str(plain.kubeconfig_path)),
        make_kube(kubeconfig=str(tls_token.kubeconfig_path)),
    ):
        used = kube.http._transport
        assert type(used) is expected, f"asked for {transport!r}, got {type(used).__name__}"
        assert (await kube.list(NODES)).resource_version


async def test_default_transport_is_aiohttp(plain: FakeKube) -> None:
    http = build_http_client("on", url=plain.url, token=plain.token)
    assert http is not None
    try:
        assert isinstance(http._transport, AiohttpKubeTransport)
    finally:
        await http.aclose()


@pytest.mark.parametrize("where", ["url", "kubeconfig"])
def test_unknown_transport_is_a_config_error(plain: FakeKube, where: str) -> None:
    target: dict[str, Any] = (
        {"url": plain.url, "token": plain.token} if where == "url" else {"kubeconfig": str(plain.kubeconfig_path)}
    )
    with pytest.raises(KubeConfigError, match="bogus"):
        build_http_client("on", transport="bogus", **target)


# -- the same failure, the same class: what each transport calls a timeout -----------------------------


async def test_non_timeouts_are_not_reported_as_timeouts(
    tls_token: FakeKube, tls_client_cert: FakeKube, make_kube: MakeKube, transport: str, tmp_path: Path
) -> None:
    """Refused connections, failed certificate checks and dropped connections are not timeouts.

    httpx-aiohttp's own table maps every ``aiohttp.ClientConnectionError`` to ``httpx.ConnectTimeout``;
    AiohttpKubeTransport re-classifies them as httpx's transport would (ConnectError, ...), so logs and
    callers can tell "refused" from "timed out".
    """

    def other_ca(config: dict[str, Any]) -> None:
        cluster_of(config)["certificate-authority-data"] = b64(trustme.CA().cert_pem.bytes())

    refused = make_kube(url=f"http://127.0.0.1:{free_port()}", token="t")
    untrusted = make_kube(kubeconfig=tls_token.edited_kubeconfig(tmp_path / "other-ca.yaml", other_ca))
    no_cert = make_kube(kubeconfig=tls_client_cert.edited_kubeconfig(tmp_path / "no-cert.yaml", no_client_cert))
    seen = {
        "connection refused": await raised_by(refused.list(NODES)),
        "untrusted server certificate": await raised_by(untrusted.list(NODES)),
        "client certificate rejected": await raised_by(no_cert.list(NODES)),
    }
    for exc in seen.values():
        assert_httpx_error(exc)
    expected: dict[str, type[httpx.TransportError]] = {
        "connection refused": httpx.ConnectError,
        "untrusted server certificate": httpx.ConnectError,
        "client certificate rejected": httpx.TransportError,
    }
    wrong = {
        case: f"{type(exc).__name__}({exc})"
        for case, exc in seen.items()
        if isinstance(exc, httpx.TimeoutException) or not isinstance(exc, expected[case])
    }
    assert not wrong, (
        f"the {transport!r} kube transport: failures that are not timeouts come out as the wrong httpx "
        f"class (expected ConnectError for refused/untrusted, a non-timeout TransportError for a rejected "
        f"client certificate): {wrong}"
    )
