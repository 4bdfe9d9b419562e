"""Policy loading: defaults, YAML and JSON, classic names, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extenders.policy import (
    DEFAULT_PREDICATES,
    DEFAULT_PRIORITIES,
    PolicyError,
    default_policy,
    load_policy,
    parse_policy,
    parse_policy_text,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"


def test_defaults() -> None:
    policy = load_policy(None)
    assert policy.predicate_names == list(DEFAULT_PREDICATES)
    assert policy.priority_weights == list(DEFAULT_PRIORITIES)
    # kube-scheduler's default profile: its filter order, its score weights, no legacy plug-in.
    assert policy.predicate_names == [
        "CheckNodeUnschedulable",
        "PodFitsHost",
        "PodToleratesNodeTaints",
        "MatchNodeSelector",
        "PodFitsHostPorts",
        "PodFitsResources",
        "NoDiskConflict",
        "PodTopologySpread",
        "MatchInterPodAffinity",
    ]
    assert dict(policy.priority_weights) == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "LeastRequested": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "BalancedResourceAllocation": 1,
        "ImageLocality": 1,
    }
    assert policy.resource_weights == {"cpu": 1, "memory": 1}
    assert policy.hard_pod_affinity_symmetric_weight == 1
    assert policy.always_check_all_predicates is False
    assert load_policy("") == policy == default_policy()


def test_example_file_equals_the_defaults() -> None:
    assert load_policy(str(EXAMPLE)).model_dump(exclude={"kind", "api_version"}) == default_policy().model_dump(
        exclude={"kind", "api_version"}
    )


def test_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "predicates: [PodFitsResources, {name: MatchNodeSelector}]\n"
        "priorities:\n  - {name: MostRequested, weight: 3}\n  - ImageLocality\n"
        "resourceWeights: {cpu: 2, memory: 1, example.com/gpu: 5}\n"
        "hardPodAffinitySymmetricWeight: 10\nalwaysCheckAllPredicates: true\n"
    )
    policy = load_policy(str(path))
    assert policy.predicate_names == ["PodFitsResources", "MatchNodeSelector"]
    assert policy.priority_weights == [("MostRequested", 3), ("ImageLocality", 1)]
    assert policy.resource_weights == {"cpu": 2, "memory": 1, "example.com/gpu": 5}
    assert policy.hard_pod_affinity_symmetric_weight == 10
    assert policy.always_check_all_predicates is True


def test_classic_json_policy(tmp_path: Path) -> None:
    classic = {
        "kind": "Policy",
        "apiVersion": "v1",
        "predicates": [{"name": "PodFitsHostPorts"}, {"name": "PodFitsResources"}],
        "priorities": [
            {"name": "LeastRequestedPriority", "weight": 1},
            {"name": "BalancedResourceAllocation", "weight": 2},
        ],
        "hardPodAffinitySymmetricWeight": 5,
    }
    path = tmp_path / "p.json"
    path.write_text(json.dumps(classic))
    policy = load_policy(str(path))
    assert policy.predicate_names == ["PodFitsHostPorts", "PodFitsResources"]
    assert policy.priority_weights == [("LeastRequested", 1), ("BalancedResourceAllocation", 2)]


def test_empty_lists_mean_none() -> None:
    policy = parse_policy({"predicates": [], "priorities": []})
    assert policy.predicate_names == []
    assert policy.priority_weights == []


def test_unknown_names_are_named_with_the_known_list() -> None:
    with pytest.raises(PolicyError) as err:
        parse_policy({"predicates": ["PodFitsResources", "NoVolumeZoneConflict"]}, "my.yaml")
    message = str(err.value)
    assert "my.yaml" in message and "'NoVolumeZoneConflict'" in message
    assert "PodFitsHostPorts" in message and "MatchInterPodAffinity" in message
    with pytest.raises(PolicyError, match=r"unknown priority 'FancyScore'.*LeastRequested"):
        parse_policy({"priorities": [{"name": "FancyScore", "weight": 1}]})


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"predicates": ["PodFitsResources", "PodFitsResources"]}, "listed twice"),
        ({"priorities": [{"name": "LeastRequested", "weight": 0}]}, "weight"),
        ({"resourceWeights": {"cpu": 0}}, "resourceWeights"),
        ({"hardPodAffinitySymmetricWeight": 101}, "hardPodAffinitySymmetricWeight"),
        ({"alwaysCheckAllPredicate": True}, "alwaysCheckAllPredicate"),
        ({"priorities": [{"name": "LeastRequested", "wieght": 2}]}, "wieght"),
    ],
)
def test_invalid_policies(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(PolicyError, match=fragment):
        parse_policy(data)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(str(tmp_path / "missing.yaml"))
    with pytest.raises(PolicyError, match="not valid YAML"):
        parse_policy_text("predicates: [a\n  b: :")
    with pytest.raises(PolicyError, match="mapping"):
        parse_policy_text("- a\n- b\n")
