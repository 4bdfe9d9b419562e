"""Faults that strike while a call is in progress, against real processes: Redis restarted empty
while gang members are held at bind, a replica SIGKILLed in the middle of a filter, and an API server
slower than the bind's request timeout. Each test says what must hold and checks it where it lives
(the fake API server's bindings, the shared Redis, another replica's answers)."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aredis

from app.serving.embedded_redis import EmbeddedRedis
from extenders.sync.store import Store
from tests.fake_kube.client import make_node, make_pod
from tests.gang_support import GPU, gpu_node, member
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess, StartServer
from tests.waiting import eventually

pytestmark = pytest.mark.integration

Json = dict[str, Any]


@pytest.fixture
def own_redis() -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis().start()
    yield server
    server.stop()


async def bind(client: httpx.AsyncClient, server: ServerProcess, pod: Json, node: str) -> tuple[str, float]:
    """One bind call as kube-scheduler makes it: the answer's Error and when it came (monotonic)."""
    meta = pod["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    resp = await client.post(f"{server.url}/bind", json=body)
    assert resp.status_code == 200, resp.text
    error: str = resp.json()["Error"]
    return error, time.monotonic()


async def doc(client: httpx.AsyncClient, server: ServerProcess, path: str) -> Json | None:
    resp = await client.get(f"{server.url}{path}", timeout=5)
    if resp.status_code != 200:
        return None
    answer: Json = resp.json()
    return answer


# -- Redis restarted empty while gang members are held ---------------------------------------------------


async def test_redis_restarted_empty_under_held_gang_members_binds_nothing_then_a_gang_completes(
    own_redis: EmbeddedRedis, fake_kube: FakeKube
) -> None:
    """Two of a gang of three are held at bind on two replicas when Redis comes back empty: both held
    calls answer an Error at once (not at the end of the 30 s window), the API server receives no
    binding, the leader relists (the nodes are back in both snapshots), and the gang, bound again, completes."""
    for node in (gpu_node("rr-n1", 2), gpu_node("rr-n2", 2)):
        fake_kube.client.create(node)
    pods = [fake_kube.client.create(member(f"w-{i}", "train", 3, namespace="rr")) for i in range(3)]
    env = {
        "EXTENDER_REDIS_URL": own_redis.url,
        "EXTENDER_REDIS_PREFIX": "rr",
        "EXTENDER_KUBE_MODE": "on",
        "EXTENDER_KUBE_URL": fake_kube.url,
        "EXTENDER_KUBE_TOKEN": fake_kube.token,
        "EXTENDER_LEASE_SECONDS": "2",
        "EXTENDER_GANG_WINDOW_SECONDS": "30",
        "EXTENDER_GANG_ARRIVAL_LEASE_SECONDS": "1",
        "EXTENDER_GANG_POLL_INTERVAL_SECONDS": "0.2",
        "EXTENDER_GANG_SWEEP_INTERVAL_SECONDS": "0.2",
    }
    replicas = [ServerProcess(env, f"rr{i + 1}") for i in range(2)]
    try:
        for replica in replicas:
            replica.wait_ready()
        async with httpx.AsyncClient(timeout=60) as client:

            async def synced() -> bool:
                for replica in replicas:
                    for node in ("rr-n1", "rr-n2"):
                        if await doc(client, replica, f"/v1/nodes/{node}") is None:
                            return False
                    gang = await doc(client, replica, "/v1/gangs/rr/train")
                    if gang is None or gang["members"] < 3:
                        return False
                return True

            await eventually(synced, 20)
            held = [
                asyncio.create_task(bind(client, replicas[0], pods[0], "rr-n1")),
                asyncio.create_task(bind(client, replicas[1], pods[1], "rr-n2")),
            ]

            async def two_held() -> bool:
                gang = await doc(client, replicas[0], "/v1/gangs/rr/train")
                return gang is not None and len(gang["arrived"]) == 2

            await eventually(two_held, 10)
            assert not any(task.done() for task in held)

            own_redis.stop()
            EmbeddedRedis(port=own_redis.port).start()  # same port, no data: every reservation and arrival is gone
            back = time.monotonic()
            answers = await asyncio.wait_for(asyncio.gather(*held), 20)
            for error, answered in answers:
                assert error, "a held member whose arrival vanished must not be told it is bound"
                assert "gang rr/train" in error, error
                # The 30 s window is far off: the calls end because the arrivals are gone (poll 0.2 s,
                # arrival lease 1 s), with a margin for a loaded machine.
                assert answered - back < 8.0, f"held call answered {answered - back:.1f}s after Redis came back"
            assert fake_kube.requests("bind", "pods") == 0, "nothing may be bound while the gang is incomplete"
            assert all(
                not fake_kube.client.get("Pod", p["metadata"]["name"], "rr")["spec"].get("nodeName") for p in pods
            )

            async def rebuilt() -> bool:
                for replica in replicas:
                    if (await client.get(f"{replica.url}/readyz")).status_code != 200:
                        return False
                    for node in ("rr-n1", "rr-n2"):
                        found = await doc(client, replica, f"/v1/nodes/{node}")
                        if found is None or found["requested"].get(GPU, 0) != 0:
                            return False
                return await synced()  # the gang's pods relisted too, not only the nodes

            await eventually(rebuilt, 30)  # the leader lost its lease with the data: it campaigns and relists

            async def one_leader() -> bool:
                # The old leader learns at its next renewal that the wiped lease is gone (its writes are
                # fenced meanwhile); until then both may say they lead.
                leaders = [(await client.get(f"{r.url}/readyz")).json()["is_leader"] for r in replicas]
                return leaders.count(True) == 1

            await eventually(one_leader, 10)

            try:
                results = await asyncio.wait_for(
                    asyncio.gather(*(bind(client, replicas[i % 2], p, f"rr-n{i % 2 + 1}") for i, p in enumerate(pods))),
                    20,
                )
            except TimeoutError:
                seen = [await doc(client, replica, "/v1/gangs/rr/train") for replica in replicas]
                logs = "\n".join(f"--- {replica.name}\n{replica.log()}" for replica in replicas)
                raise AssertionError(f"the binds did not all answer within 20 s; the gang: {seen}\n{logs}") from None
            assert [error for error, _ in results] == ["", "", ""]
            placed = [fake_kube.client.get("Pod", p["metadata"]["name"], "rr")["spec"]["nodeName"] for p in pods]
            assert placed == ["rr-n1", "rr-n2", "rr-n1"]
            assert fake_kube.requests("bind", "pods") == 3
        for replica in replicas:
            assert "Traceback" not in replica.log(), replica.log()
    finally:
        for replica in replicas:
            replica.stop()


# -- a replica SIGKILLed while answering filter ----------------------------------------------------------

SLOW_FILTER_NODES = 4000


def _nodes(count: int) -> list[Json]:
    """Node objects as kube-scheduler sends them without nodeCacheCapable; every tenth is too small."""
    nodes = []
    for i in range(count):
        node = make_node(f"big-{i}", cpu="500m" if i % 10 == 0 else "8", labels={"zone": f"z{i % 7}"})
        node["metadata"].update(uid=str(uuid.uuid4()), resourceVersion="7")
        nodes.append(node)
    return nodes


def _post_and_kill(server: ServerProcess, body: bytes, after: float) -> BaseException | int:
    """POST ``body`` to /filter, SIGKILL the server ``after`` seconds once the body is sent, and
    return what the caller then gets: an exception, or the status if an answer came first."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request("POST", "/filter", body=body, headers={"Content-Type": "application/json"})
        killer = threading.Timer(after, server.kill)
        killer.start()
        try:
            return conn.getresponse().status
        except (OSError, http.client.HTTPException) as exc:
            return exc
        finally:
            killer.join()
    finally:
        conn.close()


async def test_a_replica_killed_mid_filter_leaves_nothing_behind_and_another_answers(
    redis_url: str, redis_prefix: str, start_server: StartServer
) -> None:
    """A filter over 4000 node objects takes seconds; its replica is SIGKILLed half a second after the
    body is sent: the caller gets a connection error, Redis holds no reservation, no gang state and no
    refusal for the pod, and the same call on the other replica answers correctly, three times (the
    third through its equivalence cache, which admits a class on its second sighting)."""
    env = {"EXTENDER_KUBE_MODE": "off"}
    victim = start_server(env=env, name="victim", ready=True)
    survivor = start_server(env=env, name="survivor", ready=True)
    nodes = _nodes(SLOW_FILTER_NODES)
    pod = make_pod("slow", namespace="kill", cpu="1")
    pod["metadata"]["uid"] = str(uuid.uuid4())
    body = orjson.dumps({"Pod": pod, "Nodes": {"items": nodes}})

    outcome = await asyncio.to_thread(_post_and_kill, victim, body, 0.5)
    assert isinstance(outcome, BaseException), f"the victim answered ({outcome}) before it was killed: not mid-call"
    assert victim.proc.poll() is not None

    client = aredis.Redis.from_url(redis_url)
    try:
        store = Store(client, redis_prefix)
        assert await store.assumed_pods() == {}, "a filter reserves nothing, even killed half-way"
        gang_keys = [key async for key in client.scan_iter(f"{redis_prefix}:gang*")]
        refusal_keys = [key async for key in client.scan_iter(f"{redis_prefix}:refus*")]
        assert gang_keys == [] and refusal_keys == []
    finally:
        await client.aclose()

    small = {n["metadata"]["name"] for i, n in enumerate(nodes) if i % 10 == 0}
    async with httpx.AsyncClient(base_url=survivor.url, timeout=120) as http_client:
        for _ in range(3):
            resp = await http_client.post("/filter", content=body, headers={"Content-Type": "application/json"})
            assert resp.status_code == 200, resp.text
            answer = resp.json()
            assert answer["Error"] == ""
            passing = [item["metadata"]["name"] for item in answer["Nodes"]["items"]]
            assert passing == [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] not in small]
            assert set(answer["FailedAndUnresolvableNodes"]) == small
            assert all(r == "Insufficient cpu" for r in answer["FailedAndUnresolvableNodes"].values())
        stats = (await http_client.get("/v1/cache/stats")).json()
    # The third, equally right answer came through the survivor's equivalence cache.
    assert stats["verbs"]["filter"]["nodes_reused"] >= len(nodes), stats["verbs"]
    assert "Traceback" not in survivor.log(), survivor.log()


# -- the API server slower than the bind's request timeout -----------------------------------------------

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
