"""The gang bind protocol over HTTP: three server processes, one Redis, the fake kube-apiserver.

The test sends the bind (and filter) calls itself, round-robin over the replicas, to reach states
kube-scheduler gets into only by chance: a replica killed with arrivals in flight, a caller that
hangs up while held, retries of a bind that already happened. What kube-scheduler really does
with gangs is proven against the real one in tests/e2e.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from tests.fake_kube.builders import make_pod
from tests.gang_support import GANG_LABEL, GANG_MIN, GPU, gpu_node
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess, StartServer
from tests.waiting import eventually

pytestmark = pytest.mark.integration

Json = dict[str, Any]
GANG_ENV = {
    "EXTENDER_GANG_WINDOW_SECONDS": "4",
    "EXTENDER_GANG_COOLDOWN_SECONDS": "1",
    "EXTENDER_GANG_ARRIVAL_LEASE_SECONDS": "1",
    "EXTENDER_GANG_POLL_INTERVAL_SECONDS": "0.2",
    "EXTENDER_GANG_SWEEP_INTERVAL_SECONDS": "0.2",
}


class Cluster:
    def __init__(self, kube: FakeKube, servers: list[ServerProcess]) -> None:
        self.kube = kube
        self.servers = servers
        self.http = httpx.AsyncClient(timeout=60)

    def server(self, i: int) -> ServerProcess:
        return self.servers[i % len(self.servers)]

    async def bind(self, i: int, pod: Json, node: str) -> str:
        meta = pod["metadata"]
        body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
        resp = await self.http.post(f"{self.server(i).url}/bind", json=body)
        assert resp.status_code == 200, resp.text
        error: str = resp.json()["Error"]
        return error

    async def filter(self, i: int, pod: Json, nodes: list[str]) -> Json:
        resp = await self.http.post(f"{self.server(i).url}/filter", json={"Pod": pod, "NodeNames": nodes})
        assert resp.status_code == 200, resp.text
        answer: Json = resp.json()
        return answer

    async def gang(self, i: int, namespace: str, name: str) -> Json | None:
        resp = await self.http.get(f"{self.server(i).url}/v1/gangs/{namespace}/{name}")
        if resp.status_code == 404:
            return None
        assert resp.status_code == 200, resp.text
        doc: Json = resp.json()
        return doc

    async def gpus_requested(self, i: int, node: str) -> int:
        resp = await self.http.get(f"{self.server(i).url}/v1/nodes/{node}")
        assert resp.status_code == 200, resp.text
        return int(resp.json()["requested"].get(GPU, 0))

    def node_of(self, pod: Json) -> str:
        meta = pod["metadata"]
        return str(self.kube.client.get("Pod", meta["name"], meta["namespace"])["spec"].get("nodeName") or "")

    async def create(self, nodes: list[Json], pods: list[Json]) -> list[Json]:
        for node in nodes:
            self.kube.client.create(node)
        created = [self.kube.client.create(p) for p in pods]
        gangs = {
            (p["metadata"]["namespace"], p["metadata"]["labels"][GANG_LABEL])
            for p in pods
            if GANG_LABEL in p["metadata"]["labels"]
        }

        async def synced() -> bool:
            for i in range(len(self.servers)):
                for node in nodes:
                    resp = await self.http.get(f"{self.server(i).url}/v1/nodes/{node['metadata']['name']}")
                    if resp.status_code != 200:
                        return False
                for ns, name in gangs:
                    doc = await self.gang(i, ns, name)
                    want = sum(1 for p in pods if p["metadata"]["labels"].get(GANG_LABEL) == name)
                    if doc is None or doc["members"] < want:
                        return False
            return True

        await eventually(synced, 20)
        return created


def gang_pod(name: str, namespace: str, gang: str | None, minimum: int | None = None) -> Json:
    labels = {GANG_LABEL: gang} if gang else {}
    annotations = {GANG_MIN: str(minimum)} if minimum else None
    return make_pod(name, namespace=namespace, labels=labels, annotations=annotations, extra_requests={GPU: "1"})


@pytest.fixture
async def start_cluster(fake_kube: FakeKube, start_server: StartServer) -> Any:
    clusters: list[Cluster] = []

    async def _start(n: int = 3, **env: str) -> Cluster:
        base = {
            "EXTENDER_KUBE_MODE": "on",
            "EXTENDER_KUBE_URL": fake_kube.url,
            "EXTENDER_KUBE_TOKEN": fake_kube.token,
            "EXTENDER_LEASE_SECONDS": "2",
            **GANG_ENV,
            **env,
        }
        servers = [start_server(env=base, name=f"r{i + 1}", ready=True) for i in range(n)]
        cluster = Cluster(fake_kube, servers)
        clusters.append(cluster)
        return cluster

    yield _start
    for cluster in clusters:
        await cluster.http.aclose()


async def test_gang_of_eight_binds_all_only_after_the_eighth_arrival(start_cluster: Any) -> None:
    c: Cluster = await start_cluster()
    pods = await c.create(
        [gpu_node("g1-n1", 4), gpu_node("g1-n2", 4)], [gang_pod(f"w-{i}", "one", "train", 8) for i in range(8)]
    )
    held = [asyncio.create_task(c.bind(i, p, "g1-n1" if i < 4 else "g1-n2")) for i, p in enumerate(pods[:7])]

    async def seven_arrived() -> bool:
        doc = await c.gang(1, "one", "train")
        return doc is not None and len(doc["arrived"]) == 7

    await eventually(seven_arrived)
    doc = await c.gang(2, "one", "train")
    assert doc is not None
    assert (doc["state"], doc["minMember"], doc["members"], doc["bound"]) == ("assembling", 8, 8, 0)
    assert {a["replica"] for a in doc["arrived"]} == {"r1", "r2", "r3"}
    assert c.kube.requests("bind", "pods") == 0 and not any(t.done() for t in held)
    started = time.monotonic()
    assert await c.bind(7, pods[7], "g1-n2") == ""
    assert await asyncio.wait_for(asyncio.gather(*held), 5) == [""] * 7
    assert time.monotonic() - started < 2.0
    assert sorted(c.node_of(p) for p in pods) == ["g1-n1"] * 4 + ["g1-n2"] * 4
    listed = (await c.http.get(f"{c.servers[0].url}/v1/gangs")).json()
    assert any(g["namespace"] == "one" and g["name"] == "train" and g["state"] == "permitted" for g in listed)


async def test_gang_short_of_its_minimum_binds_nothing_and_frees_the_capacity(start_cluster: Any) -> None:
    c: Cluster = await start_cluster(EXTENDER_GANG_WINDOW_SECONDS="2")
    # Eight members exist, but only seven reach bind before the window closes.
    pods = await c.create([gpu_node("g2-n1", 8)], [gang_pod(f"w-{i}", "two", "train", 8) for i in range(8)])
    pods = pods[:7]
    started = time.monotonic()
    results = await asyncio.gather(*(c.bind(i, p, "g2-n1") for i, p in enumerate(pods)))
    elapsed = time.monotonic() - started
    assert 1.8 < elapsed < 6.0
    for error in results:
        assert "gang two/train" in error and "only 7 of the 8 required members" in error
    assert c.kube.requests("bind", "pods") == 0
    assert all(c.node_of(p) == "" for p in pods)
    for i in range(3):
        assert await c.gpus_requested(i, "g2-n1") == 0
    doc = await c.gang(0, "two", "train")
    assert doc is not None and doc["state"] == "cooling" and doc["arrived"] == []


async def test_a_killed_replica_leaves_nothing_bound_and_nothing_reserved(start_cluster: Any) -> None:
    c: Cluster = await start_cluster(EXTENDER_GANG_WINDOW_SECONDS="6")
    pods = await c.create([gpu_node("g3-n1", 8)], [gang_pod(f"w-{i}", "three", "train", 8) for i in range(8)])
    health = [(await c.http.get(f"{s.url}/readyz")).json() for s in c.servers]
    victim_index = next(i for i, h in enumerate(health) if not h.get("is_leader"))
    victim = c.servers[victim_index]
    held = [asyncio.create_task(c.bind(i, p, "g3-n1")) for i, p in enumerate(pods[:6])]

    async def six_arrived() -> bool:
        doc = await c.gang(0, "three", "train")
        return doc is not None and len(doc["arrived"]) == 6

    await eventually(six_arrived)
    for i in range(3):
        if i != victim_index:
            assert await c.gpus_requested(i, "g3-n1") == 6
    victim.kill()
    survivors = [i for i in range(3) if i != victim_index]

    async def lapsed() -> bool:
        doc = await c.gang(survivors[0], "three", "train")
        return doc is not None and len(doc["arrived"]) == 4

    await eventually(lapsed, 5)  # the lease (1 s) lapses; the victim's two reservations go with it
    doc = await c.gang(survivors[1], "three", "train")
    assert doc is not None and victim.name not in {a["replica"] for a in doc["arrived"]}
    assert await c.gpus_requested(survivors[0], "g3-n1") == 4
    results = await asyncio.gather(*held, return_exceptions=True)
    for i, result in enumerate(results):
        if i % 3 == victim_index:
            assert isinstance(result, httpx.HTTPError)  # the connection died with the replica
        else:
            assert isinstance(result, str) and "gang three/train rejected" in result
    assert all(c.node_of(p) == "" for p in pods)
    for i in survivors:
        assert await c.gpus_requested(i, "g3-n1") == 0


async def test_two_gangs_competing_for_one_gangs_capacity_do_not_deadlock(start_cluster: Any) -> None:
    c: Cluster = await start_cluster()
    a = [gang_pod(f"a-{i}", "four", "a", 4) for i in range(4)]
    b = [gang_pod(f"b-{i}", "four", "b", 4) for i in range(4)]
    created = await c.create([gpu_node("g4-n1", 4)], a + b)
    bound_at: dict[str, float] = {}

    async def scheduler(pod: Json, i: int) -> None:
        """kube-scheduler for one pod: filter, bind when it passes, back off and retry on any error."""
        while True:
            answer = await c.filter(i, pod, ["g4-n1"])
            if answer["NodeNames"] == ["g4-n1"] and await c.bind(i + 1, pod, "g4-n1") == "":
                bound_at[pod["metadata"]["name"]] = time.monotonic()
                return
            await asyncio.sleep(0.2)

    interleaved = [p for pair in zip(created[:4], created[4:], strict=True) for p in pair]
    started = time.monotonic()
    loops = [asyncio.create_task(scheduler(p, i)) for i, p in enumerate(interleaved)]

    async def one_gang() -> bool:
        return len(bound_at) >= 4

    await eventually(one_gang, 15)
    winners = {name.split("-")[0] for name in bound_at}
    assert len(winners) == 1 and len(bound_at) == 4
    # The winning gang runs to completion; its pods go away and free the GPUs.
    for p in created:
        if p["metadata"]["name"].split("-")[0] in winners:
            c.kube.client.delete("Pod", p["metadata"]["name"], "four")
    await asyncio.wait_for(asyncio.gather(*loops), 20)
    assert time.monotonic() - started < 30
    loser_first = min(t for n, t in bound_at.items() if n.split("-")[0] not in winners)
    assert loser_first > max(t for n, t in bound_at.items() if n.split("-")[0] in winners)
    assert all(c.node_of(p) == "g4-n1" for p in created if p["metadata"]["name"].split("-")[0] not in winners)


async def test_bind_retries_are_idempotent_and_conflicts_are_errors(start_cluster: Any) -> None:
    c: Cluster = await start_cluster()
    a, b, gone = await c.create(
        [gpu_node("g5-n1", 1), gpu_node("g5-n2", 1)], [gang_pod(n, "five", None) for n in ("a", "b", "gone")]
    )
    assert await c.bind(0, a, "g5-n1") == ""
    assert await c.bind(1, a, "g5-n1") == ""  # the API answers 409 for the same node: still success
    assert "already bound to node g5-n1" in await c.bind(2, a, "g5-n2")
    # The last GPU of g5-n1 is a's: b cannot be reserved there, whatever kube-scheduler thinks.
    assert f"Insufficient {GPU}" in await c.bind(0, b, "g5-n1")
    assert c.node_of(b) == ""
    c.kube.client.delete("Pod", "gone", "five")
    assert "not found" in await c.bind(1, gone, "g5-n2")
    assert await c.gpus_requested(1, "g5-n2") == 0


async def test_a_held_call_whose_caller_hangs_up_withdraws_its_arrival(start_cluster: Any) -> None:
    """kube-scheduler drops a bind call when its httpTimeout passes: the held arrival must not stay
    reserved (and later bind) behind its back; its retry then completes the gang."""
    c: Cluster = await start_cluster(EXTENDER_GANG_WINDOW_SECONDS="20")
    pods = await c.create([gpu_node("g6-n1", 4)], [gang_pod(f"w-{i}", "six", "train", 3) for i in range(3)])
    meta = pods[0]["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": "six", "PodUID": meta["uid"], "Node": "g6-n1"}
    held = asyncio.create_task(c.bind(1, pods[1], "g6-n1"))
    async with httpx.AsyncClient(timeout=0.5) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            await impatient.post(f"{c.server(0).url}/bind", json=body)

    async def only_the_patient_one_arrived() -> bool:
        doc = await c.gang(2, "six", "train")
        return doc is not None and [a["pod"] for a in doc["arrived"]] == ["w-1"]

    # Well inside the 20 s window and before a 1 s arrival lease could lapse on its own.
    started = time.monotonic()
    await eventually(only_the_patient_one_arrived, 5)
    assert time.monotonic() - started < 1.0
    assert await c.gpus_requested(2, "g6-n1") == 1  # w-1's reservation only
    assert c.kube.requests("bind", "pods") == 0 and not held.done()
    # kube-scheduler retries w-0; with w-2 the gang is complete and all three bind.
    assert list(await asyncio.gather(c.bind(0, pods[0], "g6-n1"), c.bind(2, pods[2], "g6-n1"))) == ["", ""]
    assert await asyncio.wait_for(held, 5) == ""
    assert [c.node_of(p) for p in pods] == ["g6-n1"] * 3
