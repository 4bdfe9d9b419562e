"""Prioritize in its filter's cycle takes the filter's view of the pod when the pod is the same
version of the same object (uid and resourceVersion), and derives it again otherwise."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from extenders.equivalence import cache as equivalence_cache
from extenders.equivalence import classes
from extenders.features import NEWEST, Features
from extenders.sync import convert
from tests.http.test_verbs import node, pod


@pytest.fixture
def client(redis_url: str, redis_prefix: str) -> Iterator[TestClient]:
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_prioritize_takes_the_filters_pod_only_for_the_same_version(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["cp-0", "cp-1", "cp-2"]
    client.post("/filter", json={"Pod": pod("cp-seed"), "Nodes": {"items": [node(n) for n in names]}})
    derived: list[str] = []
    classed: list[str] = []
    to_pod, to_class = convert.pod_info, classes.equivalence_class

    def counted_pod(obj: dict[str, Any]) -> Any:
        derived.append(obj["metadata"]["name"])
        return to_pod(obj)

    def counted_class(info: Any, features: Features = NEWEST) -> str:
        classed.append(info.name)
        return to_class(info, features)

    monkeypatch.setattr(convert, "pod_info", counted_pod)
    monkeypatch.setattr(equivalence_cache, "equivalence_class", counted_class)

    def cycle(incoming: dict[str, Any], scored: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        derived.clear()
        classed.clear()
        assert client.post("/filter", json={"Pod": incoming, "NodeNames": names}).json()["NodeNames"] == names
        answer = client.post("/prioritize", json={"Pod": scored or incoming, "NodeNames": names})
        assert answer.status_code == 200, answer.text
        return list(answer.json())

    versioned = pod("cp-a")
    versioned["metadata"]["resourceVersion"] = "7"
    taken = cycle(versioned)
    assert (derived, classed) == (["cp-a"], ["cp-a"])  # once, by the filter
    client.post("/filter", json={"Pod": pod("cp-pause"), "NodeNames": []})  # a different pod in between
    derived.clear()
    fresh = client.post("/prioritize", json={"Pod": versioned, "NodeNames": names}).json()
    assert fresh == taken and derived == ["cp-a"]  # no filter just before: derived again, same scores

    # A new version of the pod between its filter and its prioritize (another request, another
    # replica's client): derived again, and scored as it is now.
    newer = copy.deepcopy(versioned)
    newer["metadata"]["resourceVersion"] = "8"
    newer["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    # (The filter meets a pod shape it has met before: it takes that shape's conversion, app.pod_shapes.)
    cycle(versioned, newer)
    assert derived == ["cp-a"] and len(classed) == 2

    # No resourceVersion: nothing says it is the same pod; derived again.
    cycle(pod("cp-b"))
    assert derived == ["cp-b"] and len(classed) == 2
