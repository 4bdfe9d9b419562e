"""PodTopologySpread: kube-scheduler's PodTopologySpread filter (DoNotSchedule constraints only).

``prepare`` (PreFilter) counts, per constraint and topology value, the pods in the incoming
pod's namespace that match the constraint's selector (terminating pods excluded) on the
eligible nodes: nodes carrying every constraint's topology key and passing the constraint's
inclusion policies (nodeAffinityPolicy, default Honor: the pod's nodeSelector and required
node affinity; nodeTaintsPolicy, default Ignore). Every eligible node registers its domain,
even with zero matches. A node fails when placing the pod there would make
``matches in its domain + self-match - global minimum`` exceed maxSkew, the global minimum
being 0 while fewer than minDomains domains exist. ``matchLabelKeys`` adds ``key In
[pod's value]`` for each key the pod carries (``selectors.constraint_selector``); an empty
selector counts no pod, though the pod itself matches it. As in the plugin, a node lacking a
topology key is unresolvable, but a skew violation is resolvable: evicting matching pods can fix
it. Matching pods are read through the nodes' label index (``pod_query``), not by scanning.

``adjust`` (the same node with pods added or removed: nominated pods, preemption victims) counts
as the plugin's AddPod/RemovePod do, which differ from PreFilter: a pod counts when it is in the
namespace and matches the selector, so with ``{}`` every added or removed pod moves the count
(even below zero). Terminating pods stay out of it: preemption here takes every leaving pod as
gone already (see extenders.preemption), so removing one must not move a count it never added to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress, repeat
from operator import is_, lt, or_
from typing import Any, cast

from extenders.canonical import canonical_json
from extenders.labels import (
    LabelMatcher,
    NodeMatcher,
    compile_label_selector,
    compile_required_node_affinity,
)
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import FIT, SKIP, Verdict
from extenders.plugins.helper.node_labels import labels_of, values_of
from extenders.plugins.pod_topology_spread.selectors import constraint_selector, counts_nothing, eligibility_key
from extenders.snapshot import Snapshot
from extenders.snapshot.pod_query import PodQuery, namespace_query
from extenders.snapshot.tally import Contribution
from extenders.tolerations import DO_NOT_SCHEDULE_EFFECTS, first_untolerated_taint

CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = CONSTRAINTS_NOT_MATCH + " (missing required label)"
_FAIL_SKEW = Verdict(False, CONSTRAINTS_NOT_MATCH)
_FAIL_LABEL = Verdict(False, MISSING_LABEL, unresolvable=True)
_NO_DOMAIN_MIN = 2**31 - 1  # the plugin's starting minimum when no domain was seen


@dataclass(slots=True, frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: LabelMatcher
    min_domains: int
    honor_affinity: bool
    honor_taints: bool
    self_match: int
    query: PodQuery  # PreFilter's count: the pod's namespace and ``selector`` (none when it is ``{}``)
    update_query: PodQuery  # AddPod/RemovePod's test: the namespace and ``selector``, ``{}`` included
    selector_json: bytes  # the selector as counted (matchLabelKeys applied), canonical: part of the tally key


def compile_constraints(pod: PodInfo) -> tuple[Constraint, ...]:
    """The pod's DoNotSchedule constraints, compiled."""
    out: list[Constraint] = []
    for raw in pod.topology_spread:
        if raw.get("whenUnsatisfiable") != "DoNotSchedule":
            continue
        raw_selector = constraint_selector(raw, pod.labels)
        selector = compile_label_selector(raw_selector)
        min_domains = raw.get("minDomains")
        counted = None if counts_nothing(raw_selector) else raw_selector
        query = namespace_query(pod.namespace, counted, selector)
        update_query = query if counted is raw_selector else namespace_query(pod.namespace, raw_selector, selector)
        out.append(
            Constraint(
                max_skew=int(raw.get("maxSkew") or 1),
                topology_key=raw.get("topologyKey") or "",
                selector=selector,
                min_domains=int(min_domains) if min_domains is not None else 1,
                honor_affinity=(raw.get("nodeAffinityPolicy") or "Honor") == "Honor",
                honor_taints=(raw.get("nodeTaintsPolicy") or "Ignore") == "Honor",
                self_match=1 if selector(pod.labels) else 0,
                query=query,
                update_query=update_query,
                selector_json=canonical_json(raw_selector),
            )
        )
    return tuple(out)


@dataclass(slots=True)
class SpreadState:
    constraints: tuple[Constraint, ...]
    node_affinity: NodeMatcher | None
    tolerations: list[dict[str, Any]]
    counts: list[dict[str, int]]  # per constraint: topology value -> matching pods
    minimums: list[int]


def _eligible(state: SpreadState, constraint: Constraint, node: NodeInfo) -> bool:
    facts = node.node
    if facts is None:
        return False
    if (
        constraint.honor_affinity
        and state.node_affinity is not None
        and not state.node_affinity(node.name, facts.labels)
    ):
        return False
    return not (
        constraint.honor_taints
        and first_untolerated_taint(facts.taints, state.tolerations, DO_NOT_SCHEDULE_EFFECTS) is not None
    )


def _add_node(state: SpreadState, pod: PodInfo, node: NodeInfo, sign: int, updating: bool = False) -> None:
    """Add (or with ``sign`` -1 take away) the node's matching pods, counted as PreFilter counts
    them or, with ``updating``, as AddPod/RemovePod do (the two differ: see the module docstring)."""
    if node.node is None:
        return
    labels = node.labels
    constraints = state.constraints
    for constraint in constraints:
        if constraint.topology_key not in labels:
            return
    uid = pod.uid
    for index, constraint in enumerate(constraints):
        if not _eligible(state, constraint, node):
            continue
        query = constraint.update_query if updating else constraint.query
        matching = query.count(node, uid, live_only=True)
        counts = state.counts[index]
        value = labels[constraint.topology_key]
        counts[value] = counts.get(value, 0) + sign * matching


def _tally_key(pod: PodInfo, constraints: tuple[Constraint, ...]) -> tuple[Any, ...]:
    """Everything the counts depend on, and nothing more (pods of one workload share it even when each
    has a label of its own): the namespace, each constraint's topology key, counted selector and
    inclusion policies, and what decides a node's eligibility under those policies."""
    return (
        "spread.counts",
        pod.namespace,
        tuple((c.topology_key, c.selector_json, c.honor_affinity, c.honor_taints) for c in constraints),
        eligibility_key(pod, any(c.honor_affinity for c in constraints), any(c.honor_taints for c in constraints)),
    )


def _contribution(state: SpreadState) -> Callable[[NodeInfo], Contribution]:
    """One node's part of PreFilter's counts: per constraint its domain, registered once per eligible node
    (group ``("domains", index)``), and one item per matching pod, owned by that pod (group ``index``)."""

    def contribution(node: NodeInfo) -> Contribution:
        facts = node.node
        if facts is None:
            return ()
        labels = facts.labels
        constraints = state.constraints
        for constraint in constraints:
            if constraint.topology_key not in labels:
                return ()
        out: list[tuple[Any, str, str]] = []
        for index, constraint in enumerate(constraints):
            if not _eligible(state, constraint, node):
                continue
            value = labels[constraint.topology_key]
            out.append((("domains", index), value, ""))
            for other in constraint.query.pods(node):
                if other.deletion_timestamp is None:
                    out.append((index, value, other.uid))
        return tuple(out)

    return contribution


def _same_domains(old: NodeInfo, new: NodeInfo) -> bool:
    """Whether ``new`` is ``old`` with other pods only: the same labels and taints, hence the same
    domains and eligibility, so only its pods are added or removed."""
    before, after = old.node, new.node
    if before is None or after is None:
        return False
    return before is after or (before.labels == after.labels and before.taints == after.taints)


def _finish(state: SpreadState) -> SpreadState:
    state.minimums = [
        (min(counts.values()) if counts else _NO_DOMAIN_MIN) if len(counts) >= c.min_domains else 0
        for c, counts in zip(state.constraints, state.counts, strict=True)
    ]
    return state


class TopologySpreadFilter:
    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        constraints = compile_constraints(pod)
        if not constraints:
            return SKIP
        state = SpreadState(
            constraints=constraints,
            node_affinity=compile_required_node_affinity(pod),
            tolerations=pod.tolerations,
            counts=[{} for _ in constraints],
            minimums=[],
        )
        tally = snapshot.summary().tally(_tally_key(pod, constraints), _contribution(state))
        if pod.uid in tally.owners:  # the pod itself is placed: count without it
            for node in snapshot.nodes.values():
                _add_node(state, pod, node, 1)
        else:
            for index, counts in enumerate(state.counts):
                matching = tally.counts.get(index, {})
                for value in tally.counts.get(("domains", index), ()):
                    counts[cast(str, value)] = matching.get(value, 0)
        return _finish(state)

    def adjust(self, state: Any, pod: PodInfo, old: NodeInfo | None, new: NodeInfo) -> Any:
        """The counts with ``new`` in place of ``old``, as PreFilterExtensions would leave them."""
        if state is SKIP:
            return SKIP
        assert isinstance(state, SpreadState)
        fresh = SpreadState(
            state.constraints, state.node_affinity, state.tolerations, [dict(c) for c in state.counts], []
        )
        # Pods on both nodes cancel out, so counting both with AddPod/RemovePod's rule leaves the
        # added and removed pods counted by it; a node whose domains changed is recounted instead.
        updating = old is not None and _same_domains(old, new)
        if old is not None:
            _add_node(fresh, pod, old, -1, updating)
        _add_node(fresh, pod, new, 1, updating)
        return _finish(fresh)

    def check_all(self, pod: PodInfo, nodes: list[NodeInfo], state: Any) -> list[Verdict]:
        """``check`` on every node, one constraint at a time over all of them: a node keeps the verdict
        of the first constraint it fails, as ``check`` stops there."""
        verdicts = [FIT] * len(nodes)
        labels = labels_of(nodes)
        for index, constraint in enumerate(state.constraints):
            values = values_of(labels, constraint.topology_key)
            counts = state.counts[index]
            # ``check``'s skew test, matching + self_match - minimum > max_skew, solved for matching.
            most = constraint.max_skew - constraint.self_match + state.minimums[index]
            unlabelled = list(map(is_, values, repeat(None)))
            over = list(map(lt, repeat(most), map(counts.get, values, repeat(0))))
            for i in compress(range(len(nodes)), map(or_, unlabelled, over)):
                if verdicts[i] is FIT:
                    verdicts[i] = _FAIL_LABEL if unlabelled[i] else _FAIL_SKEW
        return verdicts

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        labels = node.labels
        for index, constraint in enumerate(state.constraints):
            value = labels.get(constraint.topology_key)
            if value is None:
                return _FAIL_LABEL
            matching = state.counts[index].get(value, 0)
            if matching + constraint.self_match - state.minimums[index] > constraint.max_skew:
                return _FAIL_SKEW
        return FIT
