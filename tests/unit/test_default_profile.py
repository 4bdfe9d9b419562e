"""The default policy is kube-scheduler's default profile: its filters in its order, its scores with its
weights, each of our names standing for the plug-in that decides the same."""

from __future__ import annotations

from extenders.plugins.names import KUBE_SCHEDULER_FILTER, KUBE_SCHEDULER_SCORER, LEGACY
from extenders.plugins.registry import FILTERS, SCORERS
from extenders.policy import default_policy

# kube-scheduler's default profile (pkg/scheduler/apis/config/v1/default_plugins.go), less the
# plug-ins an extender has nothing to add to (volume binding and limits, preemption, binding).
UPSTREAM_FILTER_ORDER = [
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "PodTopologySpread",
    "InterPodAffinity",
]
UPSTREAM_SCORE_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit (LeastAllocated)": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}


def test_default_filters_are_kube_schedulers_in_its_order() -> None:
    assert [KUBE_SCHEDULER_FILTER[name] for name in default_policy().predicate_names] == UPSTREAM_FILTER_ORDER


def test_default_scores_carry_kube_schedulers_weights() -> None:
    weights = {KUBE_SCHEDULER_SCORER[name]: weight for name, weight in default_policy().priority_weights}
    assert weights == UPSTREAM_SCORE_WEIGHTS


def test_every_plug_in_names_its_kube_scheduler_counterpart_and_legacy_ones_are_off() -> None:
    assert set(KUBE_SCHEDULER_FILTER) == set(FILTERS)
    assert set(KUBE_SCHEDULER_SCORER) == set(SCORERS)
    legacy_filters = {name for name, plugin in KUBE_SCHEDULER_FILTER.items() if plugin == LEGACY}
    assert legacy_filters == {
        "CheckNodeCondition",
        "CheckNodeMemoryPressure",
        "CheckNodeDiskPressure",
        "CheckNodePIDPressure",
    }
    assert not legacy_filters & set(default_policy().predicate_names)
    removed_scores = {name for name, plugin in KUBE_SCHEDULER_SCORER.items() if "legacy" in plugin}
    assert removed_scores == {"SelectorSpread", "NodePreferAvoidPods"}
    assert not removed_scores & {name for name, _ in default_policy().priority_weights}
