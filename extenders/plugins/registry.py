"""Every plug-in a policy can name, in one place: adding a plug-in is its module, a line here and
its test. Nothing registers itself on import."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extenders.plugins import (
    image_locality,
    names,
    node_affinity,
    node_conditions,
    node_name,
    node_ports,
    node_prefer_avoid_pods,
    node_unschedulable,
    selector_spread,
    taint_toleration,
    volume_restrictions,
)
from extenders.plugins.framework import Filter, FilterPlugin, ScorePlugin, Scorer
from extenders.plugins.inter_pod_affinity import filtering as inter_pod_affinity_filtering
from extenders.plugins.inter_pod_affinity import scoring as inter_pod_affinity_scoring
from extenders.plugins.node_resources import balanced_allocation, fit, requested
from extenders.plugins.pod_topology_spread import filtering as topology_spread_filtering
from extenders.plugins.pod_topology_spread import scoring as topology_spread_scoring

_FILTER_PLUGINS: tuple[tuple[str, FilterPlugin[Any]], ...] = (
    (names.NODE_CONDITION, node_conditions.NodeConditionFilter()),
    (names.NODE_UNSCHEDULABLE, node_unschedulable.NodeUnschedulableFilter()),
    (names.NODE_NAME, node_name.NodeNameFilter()),
    (names.NODE_AFFINITY_FILTER, node_affinity.NodeAffinityFilter()),
    (names.TAINT_TOLERATION_FILTER, taint_toleration.TaintTolerationFilter()),
    (names.MEMORY_PRESSURE, node_conditions.memory_pressure()),
    (names.DISK_PRESSURE, node_conditions.disk_pressure()),
    (names.PID_PRESSURE, node_conditions.pid_pressure()),
    (names.NODE_RESOURCES_FIT, fit.ResourcesFitFilter()),
    (names.NODE_PORTS, node_ports.NodePortsFilter()),
    (names.VOLUME_RESTRICTIONS, volume_restrictions.VolumeRestrictionsFilter()),
    (names.POD_TOPOLOGY_SPREAD, topology_spread_filtering.TopologySpreadFilter()),
    (names.INTER_POD_AFFINITY_FILTER, inter_pod_affinity_filtering.InterPodAffinityFilter()),
)

_SCORE_PLUGINS: tuple[tuple[str, ScorePlugin[Any]], ...] = (
    (names.LEAST_REQUESTED, requested.least_requested()),
    (names.MOST_REQUESTED, requested.most_requested()),
    (names.BALANCED_ALLOCATION, balanced_allocation.BalancedAllocationScorer()),
    (names.NODE_AFFINITY, node_affinity.NodeAffinityScorer()),
    (names.TAINT_TOLERATION, taint_toleration.TaintTolerationScorer()),
    (names.IMAGE_LOCALITY, image_locality.ImageLocalityScorer()),
    (names.SELECTOR_SPREAD, selector_spread.SelectorSpreadScorer()),
    (names.POD_TOPOLOGY_SPREAD, topology_spread_scoring.TopologySpreadScorer()),
    (names.INTER_POD_AFFINITY, inter_pod_affinity_scoring.InterPodAffinityScorer()),
    (names.NODE_PREFER_AVOID_PODS, node_prefer_avoid_pods.NodePreferAvoidPodsScorer()),
)

FILTERS: Mapping[str, Filter] = {name: Filter.of(name, plugin) for name, plugin in _FILTER_PLUGINS}
SCORERS: Mapping[str, Scorer] = {name: Scorer.of(name, plugin) for name, plugin in _SCORE_PLUGINS}

# The filters whose verdicts concurrent binds change (what bind re-checks when it reserves).
CAPACITY_FILTERS: tuple[str, ...] = (names.NODE_RESOURCES_FIT, names.NODE_PORTS)
# Scorers applied as a veto after the weighted average instead of inside it (see extenders.engine.scoring).
VETO_SCORERS = frozenset({names.NODE_PREFER_AVOID_PODS})
