"""A preemptor retried before the snapshot sees its victims go, over HTTP against a server process.

kube-scheduler retries a preemptor as soon as its own informer sees the victims deleted; the
extender's watch can be a few milliseconds behind. Refused then, kube-scheduler would preempt a
second time. Here the victim is never deleted until the test says so, which is that lag held open.
A retry whose cache still holds the victims proposes the same preemption again: that repeat is declined,
and so is any preemption whose victims are all gone already where the pod then fits.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack import http_client
from devstack.kube import wait_for
from devstack.metrics import samples_by
from extenders.scheduling.preempt import REPEAT_WAIT_SECONDS
from tests.fake_kube.builders import make_node, make_pod
from tests.plugins.fake_kube import FakeKube
from tests.plugins.servers import ServerProcess

pytestmark = pytest.mark.integration

Json = dict[str, Any]
WAIT_SECONDS = 3.0  # the server's wait for a preemptor's victims; the test deletes b within it


class Cluster:
    def __init__(self, kube: FakeKube, server: ServerProcess, pods: dict[str, Json]) -> None:
        self.kube = kube
        self.server = server
        self.pods = pods

    def post(self, verb: str, body: Json, timeout: float = 10.0) -> Json:
        response = http_client.post(f"{self.server.url}/{verb}", json=body, timeout=timeout)
        assert response.status_code == 200, response.text
        answer: Json = response.json()
        return answer

    def filter(self, name: str, nodes: list[str], nominated: str = "") -> Json:
        pod = dict(self.pods[name])
        if nominated:
            pod["status"] = {**pod["status"], "nominatedNodeName": nominated}
        return self.post("filter", {"Pod": pod, "NodeNames": nodes})

    def retries(self) -> dict[str, float]:
        """``extender_preemptor_retries_total`` by outcome."""
        return samples_by(self.server.get("/metrics").text, "extender_preemptor_retries_total", "outcome")

    def bind(self, name: str, node: str) -> str:
        meta = self.pods[name]["metadata"]
        body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
        return str(self.post("bind", body).get("Error") or "")


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str) -> Iterator[Cluster]:
    kube = FakeKube(tmp_path, bookmark_interval=0.5)
    server: ServerProcess | None = None
    try:
        for name in ("n1", "n2"):
            kube.client.create(make_node(name, cpu="4"))
        pods = {
            name: kube.client.create(make_pod(name, cpu=cpu, node_name=node, priority=priority))
            for name, cpu, node, priority in (
                ("a", "4", "n1", 300),
                ("b", "4", "n2", 100),
                ("urgent", "4", None, 1000),
                ("other", "4", None, 1000),
            )
        }
        env = {
            "EXTENDER_REDIS_URL": redis_url,
            "EXTENDER_REDIS_PREFIX": f"retry{uuid.uuid4().hex[:8]}",
            "EXTENDER_KUBE_MODE": "on",
            "EXTENDER_KUBE_URL": kube.url,
            "EXTENDER_KUBE_TOKEN": kube.token,
            "EXTENDER_PREEMPTOR_BIND_WAIT_SECONDS": str(WAIT_SECONDS),
        }
        server = ServerProcess(env, "preemptor-retry")
        server.wait_healthy()
        server.wait_ready()
        yield Cluster(kube, server, pods)
    finally:
        if server is not None:
            server.stop()
        kube.stop()


def test_a_preemptor_retried_before_its_victim_is_seen_gone_passes_and_binds_once_it_is(cluster: Cluster) -> None:
    uid = {name: pod["metadata"]["uid"] for name, pod in cluster.pods.items()}
    # Before any preemption, nothing fits the urgent pod: n1 holds a, n2 holds b.
    assert cluster.filter("urgent", ["n1", "n2"])["NodeNames"] == []
    victims = {"n1": {"Pods": [{"UID": uid["a"]}]}, "n2": {"Pods": [{"UID": uid["b"]}]}}
    answer = cluster.post("preempt", {"Pod": cluster.pods["urgent"], "NodeNameToMetaVictims": victims})
    assert set(answer["NodeNameToMetaVictims"]) == {"n1", "n2"}, answer

    # kube-scheduler picked n2 and its informer saw b go; the extender's snapshot has not (b is never
    # deleted here). The retry's filter passes n2 for the urgent pod, and for it alone.
    assert cluster.filter("urgent", ["n2"])["NodeNames"] == ["n2"], cluster.server.log()
    assert cluster.filter("other", ["n2"])["NodeNames"] == []
    # Nominated to n1, the pod is not let onto n2 by n2's victims.
    assert cluster.filter("urgent", ["n2"], nominated="n1")["NodeNames"] == []
    assert cluster.retries() == {"passed": 1}

    # A bind to a node whose victim stays waits for it, then is refused: nothing is bound on it.
    started = time.monotonic()
    error = cluster.bind("urgent", "n1")
    assert "no longer fits node n1" in error and time.monotonic() - started >= WAIT_SECONDS, error
    # A pod that preempted nothing is refused at once.
    started = time.monotonic()
    assert "no longer fits node n2" in cluster.bind("other", "n2")
    assert time.monotonic() - started < WAIT_SECONDS
    assert cluster.retries() == {"passed": 1, "refused": 1}

    # The bind to n2 waits for b to be seen gone, and then binds.
    result: list[str] = []
    binding = threading.Thread(target=lambda: result.append(cluster.bind("urgent", "n2")))
    binding.start()
    # b goes only once the bind waits for it: on a loaded machine the call could arrive after that.
    wait_for(lambda: "victims on n2 to go" in cluster.server.log(), WAIT_SECONDS, "the bind waiting for b")
    assert binding.is_alive()
    cluster.kube.client.delete("Pod", "b", grace_period=0)
    binding.join(timeout=10)
    assert result == [""], cluster.server.log()
    assert cluster.kube.client.get("Pod", "urgent")["spec"].get("nodeName") == "n2"
    assert cluster.retries() == {"passed": 1, "refused": 1, "bound": 1}


def test_a_repeat_of_a_preemption_already_made_is_declined_once_its_victims_are_gone(cluster: Cluster) -> None:
    # kube-scheduler retries a preemptor when any pod goes; if its cache still holds the victims it
    # evicted, it proposes them again. Answered, that repeat deletes nothing and emits no deletion
    # event, and kube-scheduler can leave the pod parked for minutes.
    uid = {name: pod["metadata"]["uid"] for name, pod in cluster.pods.items()}

    def preempt(name: str, victims: dict[str, str], nominated: str = "") -> tuple[Json, float]:
        pod = dict(cluster.pods[name])
        if nominated:
            pod["status"] = {**pod["status"], "nominatedNodeName": nominated}
        body = {"Pod": pod, "NodeNameToMetaVictims": {n: {"Pods": [{"UID": uid[v]}]} for n, v in victims.items()}}
        started = time.monotonic()
        answer = cluster.post("preempt", body)["NodeNameToMetaVictims"] or {}
        return answer, time.monotonic() - started

    first, _ = preempt("urgent", {"n1": "a", "n2": "b"})
    assert set(first) == {"n1", "n2"}, first
    # Nominated to n1, whose victim a is still there: the repeat waits a moment for the watch, then,
    # a still being there (its eviction may have failed), is answered as before.
    again, took = preempt("urgent", {"n1": "a"}, nominated="n1")
    assert set(again) == {"n1"} and took >= REPEAT_WAIT_SECONDS, (again, took)
    assert "repeat_declined" not in cluster.retries()

    # kube-scheduler picked n2 and evicted b; its retry proposes b again.
    cluster.kube.client.delete("Pod", "b", grace_period=0)
    deadline = time.monotonic() + 10
    while (answer := preempt("urgent", {"n2": "b"}, nominated="n2")[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert answer == {}, cluster.server.log()
    assert cluster.retries().get("repeat_declined", 0) >= 1
    # Another preemptor proposing b (gone) fits on n2 now: no preemption is needed anywhere, not even
    # on n1, whose victim is there (the pod waits for kube-scheduler to see b go).
    assert preempt("other", {"n1": "a", "n2": "b"})[0] == {}, cluster.server.log()
    assert cluster.retries().get("already_freed", 0) >= 1
    # Proposed where its victim is still there, it is answered as always.
    assert set(preempt("other", {"n1": "a"})[0]) == {"n1"}
