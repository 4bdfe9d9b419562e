"""Faults that strike while a call is in progress, against real processes: Redis restarted empty
while gang members are held at bind, and a replica SIGKILLed in the middle of a filter. Each test says
what must hold and checks it where it lives (the fake API server's bindings, the shared Redis, another
replica's answers); an API server slower than the bind's request timeout is test_slow_api_binds.py."""

from __future__ import annotations

import asyncio
import http.client
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import orjson
import pytest
import redis.asyncio as aredis

from app.serving.embedded_redis import EmbeddedRedis
from extenders.sync.store import Store
from tests.fake_kube.builders import make_node, make_pod
from tests.gang_support import GPU, gpu_node, member
from tests.integration.replica_calls import Json, bind, doc
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess, StartServer
from tests.waiting import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def own_redis() -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis().start()
    yield server
    server.stop()


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
