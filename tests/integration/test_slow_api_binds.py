"""An API server slower than the bind's request timeout, against real processes: a Binding answered too
late, one never carried out, and a gang whose Bindings get no answer. Each test says what happens to the
reservations and checks it in the shared Redis and the fake API server's bindings."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.fake_kube.builders import make_node, make_pod
from tests.gang_support import GPU, gpu_node, member
from tests.integration.replica_calls import Json, bind, doc
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import StartServer
from tests.waiting import eventually

pytestmark = pytest.mark.integration


KUBE_TIMEOUT = 1.5


def slow_api_env(fake_kube: FakeKube, **extra: str) -> dict[str, str]:
    """A replica on the fake API server with the short request timeout these tests outlast."""
    return {
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
        "EXTENDER_KUBE_TIMEOUT_SECONDS": str(KUBE_TIMEOUT),
        "EXTENDER_LEASE_SECONDS": "3",
        **extra,
    }


BINDING_DELAY = 4.0


async def test_a_bind_the_api_server_answers_too_late_is_an_error_and_its_reservation_is_kept(
    fake_kube: FakeKube, start_server: StartServer
) -> None:
    """The binding POST takes 4 s and the request timeout is 1.5 s: /bind answers an Error within the
    timeout plus a margin. The fake API server, like a real one that had committed the write, still binds
    the pod after its delay; so the reservation must stay counted all along (no window in which the node's
    capacity looks free), the watch then confirms the pod, and kube-scheduler's retry is a success."""
    fake_kube.client.create(make_node("slow-n1", cpu="2"))
    pod = fake_kube.client.create(make_pod("web", cpu="1500m"))
    other = fake_kube.client.create(make_pod("other", cpu="1500m"))
    server = start_server(env=slow_api_env(fake_kube), ready=True)
    async with httpx.AsyncClient(timeout=30) as client:

        async def listed() -> bool:
            node = await doc(client, server, "/v1/nodes/slow-n1")
            return node is not None

        await eventually(listed, 15)
        fake_kube.client.set_latency(BINDING_DELAY, match="/binding")
        started = time.monotonic()
        error, answered = await bind(client, server, pod, "slow-n1")
        elapsed = answered - started
        assert error and "no answer" in error, error
        assert KUBE_TIMEOUT - 0.1 <= elapsed < KUBE_TIMEOUT + 3.0, f"answered after {elapsed:.2f}s"

        async def counted() -> list[Json]:
            node = await doc(client, server, "/v1/nodes/slow-n1")
            assert node is not None
            pods: list[Json] = node["pods"]
            return pods

        # While the API server still works on it, the pod's 1.5 CPU stay reserved: the other pod is refused.
        assert [p["uid"] for p in await counted()] == [pod["metadata"]["uid"]]
        refused, _ = await bind(client, server, other, "slow-n1")
        assert "Insufficient cpu" in refused, refused

        async def bound_by_the_api() -> bool:
            return bool(fake_kube.client.get("Pod", "web")["spec"].get("nodeName") == "slow-n1")

        await eventually(bound_by_the_api, BINDING_DELAY + 5)
        fake_kube.client.set_latency(0, match="/binding")

        async def confirmed() -> bool:
            pods = await counted()
            return [(p["uid"], p["assumed"]) for p in pods] == [(pod["metadata"]["uid"], False)]

        await eventually(confirmed, 10)
        node = await doc(client, server, "/v1/nodes/slow-n1")
        assert node is not None and node["requested"]["cpu"] == 1500, node
        retry, _ = await bind(client, server, pod, "slow-n1")
        assert retry == "", "kube-scheduler's retry of a bind that happened after all must succeed"
    assert fake_kube.client.get("Pod", "other")["spec"].get("nodeName") in (None, "")
    assert "Traceback" not in server.log(), server.log()


async def test_a_bind_the_api_server_never_carries_out_frees_its_reservation_when_it_expires(
    fake_kube: FakeKube, start_server: StartServer
) -> None:
    """The other outcome of a bind with no answer: the API server gives up on the Binding (504 after its
    delay, nothing written). The Error comes within the timeout plus a margin, the reservation is kept
    meanwhile and lapses with the assumed-pod TTL (3 s here), the pod stays unbound, and the retry binds it."""
    fake_kube.client.create(make_node("drop-n1", cpu="2"))
    pod = fake_kube.client.create(make_pod("web", cpu="1500m"))
    server = start_server(env=slow_api_env(fake_kube, EXTENDER_ASSUMED_TTL_SECONDS="3"), ready=True)
    async with httpx.AsyncClient(timeout=30) as client:

        async def pods_on_the_node() -> list[Json] | None:
            node = await doc(client, server, "/v1/nodes/drop-n1")
            return None if node is None else list(node["pods"])

        async def listed() -> bool:
            return await pods_on_the_node() is not None

        await eventually(listed, 15)
        fake_kube.client.set_latency(BINDING_DELAY, match="/binding", commit=False)
        started = time.monotonic()
        error, answered = await bind(client, server, pod, "drop-n1")
        assert error and "no answer" in error, error
        assert KUBE_TIMEOUT - 0.1 <= answered - started < KUBE_TIMEOUT + 3.0
        assert [p["uid"] for p in await pods_on_the_node() or []] == [pod["metadata"]["uid"]]

        async def released() -> bool:
            return await pods_on_the_node() == []

        await eventually(released, 3 + 6)  # the TTL, then the next expiry sweep, with a margin
        assert time.monotonic() - answered > 1.0, "the reservation must outlive the Error, not vanish with it"
        assert fake_kube.client.get("Pod", "web")["spec"].get("nodeName") in (None, "")
        fake_kube.client.set_latency(0, match="/binding")
        retry, _ = await bind(client, server, pod, "drop-n1")
        assert retry == ""
    assert fake_kube.client.get("Pod", "web")["spec"]["nodeName"] == "drop-n1"
    assert "Traceback" not in server.log(), server.log()


async def test_gang_members_whose_bindings_get_no_answer_keep_their_reservations(
    fake_kube: FakeKube, start_server: StartServer
) -> None:
    """A permitted gang whose Bindings outlive the request timeout: each member's call answers an Error
    in time, and each member's reservation stays counted (a plain pod is refused the node) until the API
    server, which carries the Bindings out after its delay, shows both pods bound; kube-scheduler's
    retries then succeed, and nothing is counted twice."""
    for name in ("gt-n1", "gt-n2"):
        fake_kube.client.create(gpu_node(name, gpus=1))
    members = [fake_kube.client.create(member(f"pair-{i}", "pair", 2)) for i in range(2)]
    other = fake_kube.client.create(make_pod("other", extra_requests={GPU: "1"}))
    server = start_server(env=slow_api_env(fake_kube, EXTENDER_GANG_WINDOW_SECONDS="30"), ready=True)
    nodes = ["gt-n1", "gt-n2"]
    async with httpx.AsyncClient(timeout=30) as client:

        async def on_node(node: str) -> list[tuple[str, bool]]:
            found = await doc(client, server, f"/v1/nodes/{node}")
            assert found is not None
            return [(p["uid"], p["assumed"]) for p in found["pods"]]

        async def synced() -> bool:
            gang = await doc(client, server, "/v1/gangs/default/pair")
            return all([await doc(client, server, f"/v1/nodes/{n}") for n in nodes]) and bool(gang)

        await eventually(synced, 15)
        fake_kube.client.set_latency(BINDING_DELAY, match="/binding")
        started = time.monotonic()
        answers = await asyncio.gather(*(bind(client, server, m, n) for m, n in zip(members, nodes, strict=True)))
        for error, answered in answers:
            assert "no answer" in error, error
            assert answered - started < KUBE_TIMEOUT + 4.0, f"answered after {answered - started:.2f}s"
        # The API server is still at work: both reservations stand, so the plain pod fits nowhere.
        for m, n in zip(members, nodes, strict=True):
            assert [uid for uid, _ in await on_node(n)] == [m["metadata"]["uid"]]
        for n in nodes:
            refused, _ = await bind(client, server, other, n)
            assert "Insufficient" in refused, refused

        async def bound_by_the_api() -> bool:
            return all(fake_kube.client.get("Pod", m["metadata"]["name"])["spec"].get("nodeName") for m in members)

        await eventually(bound_by_the_api, BINDING_DELAY + 5)
        fake_kube.client.set_latency(0, match="/binding")

        async def confirmed() -> bool:
            return all(
                [await on_node(n) == [(m["metadata"]["uid"], False)] for m, n in zip(members, nodes, strict=True)]
            )

        await eventually(confirmed, 10)
        retries = await asyncio.gather(*(bind(client, server, m, n) for m, n in zip(members, nodes, strict=True)))
        assert [error for error, _ in retries] == ["", ""]
        for n in nodes:
            found = await doc(client, server, f"/v1/nodes/{n}")
            assert found is not None and found["requested"][GPU] == 1, found
    assert fake_kube.client.get("Pod", "other")["spec"].get("nodeName") in (None, "")
    assert "Traceback" not in server.log(), server.log()
