"""Scores computed as soon as a filter has answered: prioritize for the very nodes that passed takes
them, and answers exactly what it would have computed; any other call computes as before."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from devstack.metrics import sample_total
from extenders import engine
from tests.http.test_verbs import node, pod

NAMES = ["pa-0", "pa-1", "pa-2", "pa-3"]


def items() -> list[dict[str, Any]]:
    """Nodes of different sizes, so the scores differ between them (and between subsets)."""
    return [node(name, cpu=str(4 + 4 * i), memory=f"{8 + 8 * i}Gi") for i, name in enumerate(NAMES)]


def _client(redis_url: str, redis_prefix: str, ahead: bool) -> TestClient:
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off", prioritize_ahead=ahead)
    return TestClient(create_app(settings))


@pytest.fixture
def clients(redis_url: str, redis_prefix: str) -> Iterator[tuple[TestClient, TestClient]]:
    """Two replicas of one store: scores computed ahead, and not."""
    with _client(redis_url, redis_prefix, True) as ahead, _client(redis_url, redis_prefix, False) as plain:
        for c in (ahead, plain):
            assert c.post("/filter", json={"Pod": pod("pa-seed"), "Nodes": {"items": items()}}).status_code == 200
        yield ahead, plain


def ahead_total(client: TestClient, outcome: str) -> float:
    text = client.get("/metrics").text
    assert "extender_prioritize_ahead_total" in text, "no extender_prioritize_ahead family on /metrics"
    return sample_total(text, "extender_prioritize_ahead_total", outcome=outcome)


@pytest.fixture
def scorings(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The candidate lists the engine scored, in order."""
    seen: list[list[str]] = []
    scores: Callable[..., Any] = engine.prioritize_values

    def counted(policy: Any, pod_: Any, snapshot: Any, names: list[str], *rest: Any) -> Any:
        seen.append(list(names))
        return scores(policy, pod_, snapshot, names, *rest)

    monkeypatch.setattr(engine, "prioritize_values", counted)
    return seen


def versioned(name: str, cpu: str = "1") -> dict[str, Any]:
    out = pod(name, cpu=cpu)
    out["metadata"]["resourceVersion"] = "11"
    return out


def cycle(client: TestClient, incoming: dict[str, Any], names: list[str] | None = None) -> list[dict[str, Any]]:
    """Filter on every node, then prioritize on ``names`` (default: those that passed)."""
    answer = client.post("/filter", json={"Pod": incoming, "NodeNames": NAMES}).json()
    scored = client.post(
        "/prioritize", json={"Pod": incoming, "NodeNames": answer["NodeNames"] if names is None else names}
    )
    assert scored.status_code == 200, scored.text
    return list(scored.json())


def test_prioritize_of_the_passing_nodes_takes_the_scores_computed_after_filter(
    clients: tuple[TestClient, TestClient], scorings: list[list[str]]
) -> None:
    ahead, plain = clients
    for round_ in range(3):  # cold, then a warm class
        incoming = versioned(f"pa-a{round_}")
        scorings.clear()
        taken = cycle(ahead, incoming)
        assert scorings == [NAMES]  # once, right after the filter answered
        assert taken == cycle(plain, incoming)
        assert len({entry["Score"] for entry in taken}) > 1  # the nodes are told apart
    assert (ahead_total(ahead, "computed"), ahead_total(ahead, "used")) == (3, 3)
    assert (ahead_total(plain, "computed"), ahead_total(plain, "used")) == (0, 0)


def test_any_other_prioritize_computes_its_own_answer(
    clients: tuple[TestClient, TestClient], scorings: list[list[str]]
) -> None:
    ahead, plain = clients
    # Fewer nodes than passed (another extender narrowed them): scored again, over those nodes only.
    incoming = versioned("pa-b")
    scorings.clear()
    subset = NAMES[1:]
    assert cycle(ahead, incoming, subset) == cycle(plain, incoming, subset)
    assert scorings == [NAMES, subset, subset]  # ahead, then ahead's call, then plain's
    # The same nodes in another order: the answer follows the call's order.
    reordered = list(reversed(NAMES))
    assert cycle(ahead, incoming, reordered) == cycle(plain, incoming, reordered)
    # A newer version of the pod between filter and prioritize: scored as it is now.
    first = versioned("pa-c")
    newer = copy.deepcopy(first)
    newer["metadata"]["resourceVersion"] = "12"
    newer["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    ahead.post("/filter", json={"Pod": first, "NodeNames": NAMES})
    now = ahead.post("/prioritize", json={"Pod": newer, "NodeNames": NAMES}).json()
    plain.post("/filter", json={"Pod": newer, "NodeNames": NAMES})
    assert now == plain.post("/prioritize", json={"Pod": newer, "NodeNames": NAMES}).json()
    assert ahead_total(ahead, "used") == 0


def test_nothing_is_computed_ahead_for_one_passing_node_or_the_nodes_form(
    clients: tuple[TestClient, TestClient], scorings: list[list[str]]
) -> None:
    ahead, _ = clients
    scorings.clear()
    # kube-scheduler does not call prioritize when a single node is left.
    only = versioned("pa-d", cpu="10")  # fits on the two largest nodes only; filter is asked about one
    answer = ahead.post("/filter", json={"Pod": only, "NodeNames": NAMES[-1:]}).json()
    assert answer["NodeNames"] == NAMES[-1:]
    # The Nodes form: prioritize refreshes from the node objects it carries, so it computes anyway.
    ahead.post("/filter", json={"Pod": versioned("pa-e"), "Nodes": {"items": items()}})
    ahead.get("/healthz")  # lets anything scheduled after the answers run
    assert scorings == [] and ahead_total(ahead, "computed") == 0


def test_prioritize_answered_from_scores_ahead_reads_only_the_pods_identity(
    clients: tuple[TestClient, TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.routes.verbs import CYCLE_VERBS, CycleVerb
    from app.wire import ExtenderArgs

    ahead, plain = clients
    parsed: list[bytes] = []
    validate = ExtenderArgs.model_validate_json

    class Counting(ExtenderArgs):
        @classmethod
        def model_validate_json(cls, body: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            parsed.append(body)
            return validate(body, **kwargs)

    monkeypatch.setitem(CYCLE_VERBS, "/prioritize", CycleVerb(Counting, CYCLE_VERBS["/prioritize"].answer))
    incoming = versioned("pa-f")
    passing = ahead.post("/filter", json={"Pod": incoming, "NodeNames": NAMES}).json()["NodeNames"]
    taken = ahead.post("/prioritize", json={"Pod": incoming, "NodeNames": passing})
    assert taken.status_code == 200 and "server-timing" in taken.headers
    assert parsed == [] and ahead_total(ahead, "used") == 1
    plain.post("/filter", json={"Pod": incoming, "NodeNames": NAMES})
    assert taken.json() == plain.post("/prioritize", json={"Pod": incoming, "NodeNames": passing}).json()
    # Without a resourceVersion the identity says too little: the pod is read and scored again.
    unversioned = pod("pa-g")
    passing = ahead.post("/filter", json={"Pod": unversioned, "NodeNames": NAMES}).json()["NodeNames"]
    parsed.clear()
    assert ahead.post("/prioritize", json={"Pod": unversioned, "NodeNames": passing}).status_code == 200
    assert len(parsed) == 1 and ahead_total(ahead, "used") == 1
