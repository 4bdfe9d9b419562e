"""Both kube transports (aiohttp's pool and httpx's own) against the fake API server, over plain
HTTP and TLS: same answers, same TLS settings from the kubeconfig, and failures only as httpx errors.

Callers (KubeClient.bind_pod, the watcher) catch ``httpx.HTTPError``; an aiohttp or ssl exception
leaking through the aiohttp transport would escape them, so every failure path here checks the class.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import trustme
import yaml

from app.serving.embedded_redis import free_port
from extenders.kube.client import BindStatus, KubeApiError
from extenders.kube.config import KubeConfigError, build_http_client
from extenders.kube.transport import TRANSPORTS, AiohttpKubeTransport
from tests.fake_kube.client import make_node, make_pod
from tests.plugins.fake_kube import FakeKube, FakeKubeTLS, MakeKube, StartFakeKube

pytestmark = pytest.mark.integration

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"

# -- servers (one per TLS variant, shared by the module) and clients ---------------------------------


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKube]:
    """http + bearer token."""
    server = FakeKube(tmp_path_factory.mktemp("plain"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tls_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKube]:
    """https (kubeconfig certificate-authority-data) + bearer token."""
    directory = tmp_path_factory.mktemp("tls-token")
    server = FakeKube(directory, tls=FakeKubeTLS.create(directory))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tls_client_cert(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKube]:
    """https requiring a client certificate; the kubeconfig carries one and no token."""
    directory = tmp_path_factory.mktemp("tls-client-cert")
    server = FakeKube(directory, token="", tls=FakeKubeTLS.create(directory, client_auth=True))
    yield server
    server.stop()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def make_kube(kube_clients: MakeKube, transport: str) -> MakeKube:
    """``make_kube(kubeconfig=... | url=..., token=..., page_size=...)``: a KubeClient over ``transport``."""
    return functools.partial(kube_clients, transport)


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


# -- a. plain HTTP + token: the API calls --------------------------------------------------------------


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


# -- b. TLS: kubeconfig CA + token ---------------------------------------------------------------------


async def test_tls_with_kubeconfig_ca(tls_token: FakeKube, make_kube: MakeKube, transport: str) -> None:
    assert tls_token.url.startswith("https://")
    tls_token.client.create(make_node(f"tls-{transport}"))
    kube = make_kube(kubeconfig=str(tls_token.kubeconfig_path), page_size=1)

    names = [n["metadata"]["name"] for n in (await kube.list(NODES)).items]

    assert f"tls-{transport}" in names
    node = await kube.get(f"{NODES}/tls-{transport}")
    assert node is not None and node["kind"] == "Node"


async def test_tls_untrusted_server_is_an_httpx_error(tls_token: FakeKube, make_kube: MakeKube, tmp_path: Path) -> None:
    def other_ca(config: dict[str, Any]) -> None:
        cluster_of(config)["certificate-authority-data"] = b64(trustme.CA().cert_pem.bytes())

    kube = make_kube(kubeconfig=tls_token.edited_kubeconfig(tmp_path / "other-ca.yaml", other_ca))
    binds_before = tls_token.requests("bind", "pods")

    assert_httpx_error(await raised_by(kube.list(NODES)))
    assert_httpx_error(await raised_by(kube.get(f"{NODES}/anything")))
    assert_httpx_error(await raised_by(drain(kube.watch(PODS, "0", timeout_seconds=5))))
    result = await kube.bind_pod("default", "web", "uid", "n1")
    assert result.status is BindStatus.ERROR, result
    assert tls_token.requests("bind", "pods") == binds_before, "nothing may reach an untrusted server"


async def test_tls_certificate_for_another_name_is_refused(
    tls_token: FakeKube, make_kube: MakeKube, tmp_path: Path
) -> None:
    """The server's certificate names 127.0.0.1 only; the hostname check must be on in both transports."""

    def by_name(config: dict[str, Any]) -> None:
        cluster_of(config)["server"] = tls_token.url.replace("127.0.0.1", "localhost")

    kube = make_kube(kubeconfig=tls_token.edited_kubeconfig(tmp_path / "by-name.yaml", by_name))

    assert_httpx_error(await raised_by(kube.list(NODES)))
    assert (await kube.bind_pod("default", "web", "uid", "n1")).status is BindStatus.ERROR


# -- c. TLS with client-certificate auth ---------------------------------------------------------------


async def test_client_certificate_auth(tls_client_cert: FakeKube, make_kube: MakeKube, transport: str) -> None:
    config = yaml.safe_load(tls_client_cert.kubeconfig_path.read_text())
    assert set(user_of(config)) == {"client-certificate-data", "client-key-data"}, "no token with client certs"
    tls_client_cert.client.create(make_node(f"mtls-{transport}"))
    kube = make_kube(kubeconfig=str(tls_client_cert.kubeconfig_path))

    names = [n["metadata"]["name"] for n in (await kube.list(NODES)).items]

    assert f"mtls-{transport}" in names
    pod = tls_client_cert.client.create(make_pod(f"mtls-{transport}"))
    bound = await kube.bind_pod("default", f"mtls-{transport}", pod["metadata"]["uid"], f"mtls-{transport}")
    assert bound.status is BindStatus.BOUND, bound


def _no_client_cert(config: dict[str, Any]) -> None:
    user_of(config).clear()


def _untrusted_client_cert(config: dict[str, Any]) -> None:
    stranger = trustme.CA().issue_cert(common_name="stranger")
    user_of(config)["client-certificate-data"] = b64(b"".join(b.bytes() for b in stranger.cert_chain_pems))
    user_of(config)["client-key-data"] = b64(stranger.private_key_pem.bytes())


@pytest.mark.parametrize("edit", [_no_client_cert, _untrusted_client_cert], ids=["no-cert", "untrusted-cert"])
async def test_client_certificate_required(
    tls_client_cert: FakeKube, make_kube: MakeKube, tmp_path: Path, edit: Callable[[dict[str, Any]], None]
) -> None:
    """The server drops the connection in the TLS 1.3 handshake's tail: an httpx error, never a status."""
    kube = make_kube(kubeconfig=tls_client_cert.edited_kubeconfig(tmp_path / "client.yaml", edit))
    lists_before = tls_client_cert.requests("list", "nodes")

    exc = await raised_by(kube.list(NODES))

    assert not isinstance(exc, KubeApiError), f"the handshake was expected to fail, got a status: {exc}"
    assert_httpx_error(exc)
    assert (await kube.bind_pod("default", "web", "uid", "n1")).status is BindStatus.ERROR
    assert tls_client_cert.requests("list", "nodes") == lists_before


# -- d. failures as httpx errors -----------------------------------------------------------------------


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


# -- e. the transport asked for is the one in use ------------------------------------------------------


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
    no_cert = make_kube(kubeconfig=tls_client_cert.edited_kubeconfig(tmp_path / "no-cert.yaml", _no_client_cert))
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
