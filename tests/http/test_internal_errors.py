"""A bug in the engine must not become an HTTP 500: each verb answers in its protocol's way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from redis.exceptions import ConnectionError as RedisConnectionError

from app.main import create_app
from app.settings import Settings
from extenders import engine, preemption
from extenders.gang.eviction import EvictionStore, GangEviction
from extenders.preemption import MetaVictims, Preemption

POD = {"metadata": {"name": "p", "namespace": "d", "uid": "u"}, "spec": {}}


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("engine bug")


@pytest.fixture
def client(redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off")
    for name in ("filter_nodes", "prioritize_nodes", "explain"):
        monkeypatch.setattr(engine, name, _boom)
    monkeypatch.setattr("extenders.scheduling.preempt.process_preemption", _boom)
    assert preemption.process_preemption is not _boom
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


def test_engine_failures_answer_through_the_protocol(client: TestClient) -> None:
    r = client.post("/filter", json={"Pod": POD, "NodeNames": ["a", "b"]})
    assert r.status_code == 200, r.text
    assert "internal error" in r.json()["Error"] and r.json()["NodeNames"] == []
    r = client.post("/prioritize", json={"Pod": POD, "NodeNames": ["a", "b"]})
    assert r.status_code == 200 and r.json() == [{"Host": "a", "Score": 0}, {"Host": "b", "Score": 0}]
    r = client.post("/preempt", json={"Pod": POD, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}]}}})
    assert r.status_code == 200 and r.json() == {"NodeNameToMetaVictims": {}}
    r = client.post("/v1/explain", json={"Pod": POD})
    assert r.status_code == 422 and "engine bug" in r.json()["detail"]
    assert 'extender_errors_total{kind="domain",verb="filter"}' in client.get("/metrics").text


def test_a_gang_eviction_that_cannot_be_recorded_preempts_nothing(
    redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unrecorded, a gang taken whole would keep its members on other nodes: half alive. So no node."""

    def taken_whole(*args: Any, **kwargs: Any) -> Preemption:
        eviction = GangEviction("d/g", "a", "d/p", ("x",), (("y", "d/g-1"),))
        return Preemption({"a": MetaVictims(["x"])}, [eviction])

    async def unreachable(self: EvictionStore, *args: Any) -> None:
        raise RedisConnectionError("Redis went away")

    monkeypatch.setattr("extenders.scheduling.preempt.process_preemption", taken_whole)
    monkeypatch.setattr(EvictionStore, "record", unreachable)
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        r = client.post("/preempt", json={"Pod": POD, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}]}}})
        assert r.status_code == 200 and r.json() == {"NodeNameToMetaVictims": {}}
        monkeypatch.undo()
        monkeypatch.setattr("extenders.scheduling.preempt.process_preemption", taken_whole)
        r = client.post("/preempt", json={"Pod": POD, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}]}}})
        assert r.json() == {"NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}], "NumPDBViolations": 0}}}


def test_a_failing_check_for_a_repeated_preemption_leaves_the_decision_to_the_rules(
    redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repeat check only ever declines; broken, it declines nothing and the preemption is decided as
    before."""

    def kept(*args: Any, **kwargs: Any) -> Preemption:
        return Preemption({"a": MetaVictims(["x"])})

    monkeypatch.setattr("extenders.scheduling.preempt.repeated_preemption", _boom)
    monkeypatch.setattr("extenders.scheduling.preempt.process_preemption", kept)
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        r = client.post("/preempt", json={"Pod": POD, "NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}]}}})
        assert r.status_code == 200, r.text
        assert r.json() == {"NodeNameToMetaVictims": {"a": {"Pods": [{"UID": "x"}], "NumPDBViolations": 0}}}
