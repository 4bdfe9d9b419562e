"""The names a policy file, the binder and the docs use for each plug-in (classic predicate and
priority names, so classic policy files keep working)."""

from __future__ import annotations

# Filters (predicates), in the default policy's order.
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
