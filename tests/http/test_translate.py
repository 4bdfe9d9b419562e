"""The answers app.translate writes from domain outcomes, in kube-scheduler's extender/v1 shape."""

from __future__ import annotations

from app.translate import (
    binding_answer,
    filter_answer,
    host_priorities,
    preemption_answer,
    prioritize_answer,
    whole_nodes,
)
from app.wire import ExtenderArgs
from extenders.preemption import MetaVictims
from extenders.scheduling import FilterOutcome, NodeScores

POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u"}}


def test_preemption_answer() -> None:
    body = preemption_answer({"n1": MetaVictims(["u1", "u2"], 1)})
    assert body == {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "u1"}, {"UID": "u2"}], "NumPDBViolations": 1}}}


def test_prioritize_answer_keeps_the_candidates_order() -> None:
    answer = prioritize_answer(NodeScores({"b": 3, "a": 0}))
    assert answer == [{"Host": "b", "Score": 3}, {"Host": "a", "Score": 0}]


def test_prioritize_answer_shaped_ahead_is_taken_as_it_is() -> None:
    scores = NodeScores({"b": 3, "a": 0})
    scores.answer = host_priorities(scores)
    assert prioritize_answer(scores) is scores.answer


def test_binding_answer() -> None:
    assert binding_answer("") == {"Error": ""}


def test_filter_answer_by_names() -> None:
    answer = filter_answer(None, FilterOutcome(["a"], {"b": "too small"}))
    assert answer == {
        "Nodes": None,
        "NodeNames": ["a"],
        "FailedNodes": {"b": "too small"},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_filter_answer_echoes_the_objects_sent() -> None:
    nodes = [{"metadata": {"name": n, "labels": {"x": n}}, "extra": {"kept": True}} for n in ("a", "b", "c")]
    args = ExtenderArgs.model_validate({"Pod": POD, "Nodes": {"items": nodes}})
    answer = filter_answer(whole_nodes(args), FilterOutcome(["c", "a"]))
    assert answer["NodeNames"] is None
    assert answer["Nodes"] == {"metadata": {}, "items": [nodes[0], nodes[2]]}


def test_filter_failure_passes_nothing() -> None:
    answer = filter_answer(None, FilterOutcome.failure("cluster snapshot unavailable"))
    assert answer["NodeNames"] == [] and answer["Error"] == "cluster snapshot unavailable"
