"""The names a policy file, the binder and the docs use for each plug-in (classic predicate and
priority names, so classic policy files keep working), and the kube-scheduler plug-in behind each."""

from __future__ import annotations

from collections.abc import Mapping

# Filters (predicates).
NODE_CONDITION = "CheckNodeCondition"
NODE_UNSCHEDULABLE = "CheckNodeUnschedulable"
NODE_NAME = "PodFitsHost"
NODE_AFFINITY_FILTER = "MatchNodeSelector"
TAINT_TOLERATION_FILTER = "PodToleratesNodeTaints"
MEMORY_PRESSURE = "CheckNodeMemoryPressure"
DISK_PRESSURE = "CheckNodeDiskPressure"
PID_PRESSURE = "CheckNodePIDPressure"
NODE_RESOURCES_FIT = "PodFitsResources"
NODE_PORTS = "PodFitsHostPorts"
VOLUME_RESTRICTIONS = "NoDiskConflict"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"  # a filter and a scorer
INTER_POD_AFFINITY_FILTER = "MatchInterPodAffinity"

# Scorers (priorities).
LEAST_REQUESTED = "LeastRequested"
MOST_REQUESTED = "MostRequested"
BALANCED_ALLOCATION = "BalancedResourceAllocation"
NODE_AFFINITY = "NodeAffinity"
TAINT_TOLERATION = "TaintToleration"
IMAGE_LOCALITY = "ImageLocality"
SELECTOR_SPREAD = "SelectorSpread"
INTER_POD_AFFINITY = "InterPodAffinity"
NODE_PREFER_AVOID_PODS = "NodePreferAvoidPods"

# The kube-scheduler plug-in that makes the same decision (what /v1/explain names). The classic
# condition and pressure predicates have none: today's kube-scheduler reads taints instead.
LEGACY = "(legacy: no kube-scheduler plug-in)"
KUBE_SCHEDULER_FILTER: Mapping[str, str] = {
    NODE_CONDITION: LEGACY,
    NODE_UNSCHEDULABLE: "NodeUnschedulable",
    NODE_NAME: "NodeName",
    NODE_AFFINITY_FILTER: "NodeAffinity",
    TAINT_TOLERATION_FILTER: "TaintToleration",
    MEMORY_PRESSURE: LEGACY,
    DISK_PRESSURE: LEGACY,
    PID_PRESSURE: LEGACY,
    NODE_RESOURCES_FIT: "NodeResourcesFit",
    NODE_PORTS: "NodePorts",
    VOLUME_RESTRICTIONS: "VolumeRestrictions",
    POD_TOPOLOGY_SPREAD: "PodTopologySpread",
    INTER_POD_AFFINITY_FILTER: "InterPodAffinity",
}
KUBE_SCHEDULER_SCORER: Mapping[str, str] = {
    LEAST_REQUESTED: "NodeResourcesFit (LeastAllocated)",
    MOST_REQUESTED: "NodeResourcesFit (MostAllocated)",
    BALANCED_ALLOCATION: "NodeResourcesBalancedAllocation",
    NODE_AFFINITY: "NodeAffinity",
    TAINT_TOLERATION: "TaintToleration",
    IMAGE_LOCALITY: "ImageLocality",
    SELECTOR_SPREAD: "SelectorSpread (legacy, no longer in kube-scheduler)",
    POD_TOPOLOGY_SPREAD: "PodTopologySpread",
    INTER_POD_AFFINITY: "InterPodAffinity",
    NODE_PREFER_AVOID_PODS: "NodePreferAvoidPods (legacy, no longer in kube-scheduler)",
}
