"""A pod's predicate states, prepared once per snapshot and checked against any number of nodes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extenders.engine.results import NOT_FOUND, combine
from extenders.equivalence import fingerprint_key
from extenders.equivalence.packing import layout_tag
from extenders.labels import SelectorError
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import SKIP, CheckAllFn, Filter, Verdict
from extenders.plugins.registry import FILTERS
from extenders.policy import Policy
from extenders.snapshot import Snapshot

CheckFn = Callable[[PodInfo, NodeInfo, Any], Verdict]
CrossStep = tuple[int, CheckFn, Any, CheckAllFn | None]


@dataclass(slots=True)
class _Step:
    name: str
    filter: Filter
    state: Any
    error: Verdict | None = None  # prepare failed: every node gets this verdict


@dataclass(slots=True, frozen=True)
class _Layout:
    """The active steps split for the equivalence cache, in policy order.

    ``local``: (check, state, how many of ``families`` the verdict rests on once this step has
    run); ``cross``: (how many local steps come before it, check, state, the filter's ``check_all``
    or None) for the steps that read other nodes and are evaluated on every call.
    """

    families: tuple[str, ...]
    local: list[tuple[CheckFn, Any, int]]
    cross: list[CrossStep]
    key: str  # where a node keeps its fingerprints of ``families``
    tag: int  # the layout's steps and families, for entries shared between replicas
    signature: str  # what ``tag`` digests, in full (no collision can pass one layout for another)


def _invalid_check(pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
    verdict: Verdict = state
    return verdict


class PreparedPod:
    """A pod's prepared predicate states against one snapshot, reusable across nodes.

    Every predicate's ``prepare`` runs once per pod (PreFilter); per node, only the predicates that
    did not answer SKIP are checked, and a node the snapshot does not know fails as unresolvable
    before any of them runs.

    ``with_node`` derives the states for the same snapshot with one node replaced (for
    instance without preemption victims) without rescanning the cluster.
    """

    __slots__ = ("_active", "_layout", "_override", "_parent", "_snapshot", "pod", "policy", "steps")

    def __init__(
        self,
        policy: Policy,
        pod: PodInfo,
        snapshot: Snapshot | None,
        steps: list[_Step],
        parent: PreparedPod | None = None,
        override: NodeInfo | None = None,
    ) -> None:
        """Either ``snapshot``, or ``parent`` and the ``override`` node replacing its namesake."""
        self.policy = policy
        self.pod = pod
        self._snapshot = snapshot
        self._parent = parent
        self._override = override
        self.steps = steps
        self._active: list[tuple[str, CheckFn, Any]] = []
        self._layout: _Layout | None = None
        for step in steps:
            if step.error is not None:
                self._active.append((step.name, _invalid_check, step.error))
            elif step.state is not SKIP:
                self._active.append((step.name, step.filter.check, step.state))

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot the states describe; for ``with_node`` results, built on first use.

        Fit checks never read it, so preemption's many ``with_node`` calls do not copy the
        node table; only ``filter_prepared`` and other explicit readers pay for the overlay.
        """
        if self._snapshot is None:
            parent, node = self._parent, self._override
            assert parent is not None and node is not None
            base = parent.snapshot
            # Every table shared; only the node table differs, so derived data is not reused.
            self._snapshot = dataclasses.replace(
                base, nodes={**base.nodes, node.name: node}, sealed=False, summary_seed=base.seed(), node_changes=None
            )
        return self._snapshot

    def _node(self, name: str) -> NodeInfo | None:
        """The node named ``name`` as these states see it, without building the overlay."""
        prepared: PreparedPod | None = self
        while prepared is not None and prepared._snapshot is None:
            override = prepared._override
            if override is not None and override.name == name:
                return override
            prepared = prepared._parent
        return prepared.snapshot.nodes.get(name) if prepared is not None else None

    @classmethod
    def build(cls, policy: Policy, pod: PodInfo, snapshot: Snapshot) -> PreparedPod:
        steps: list[_Step] = []
        for name in policy.predicate_names:
            plugin = FILTERS[name]
            try:
                steps.append(_Step(name, plugin, plugin.prepare(pod, snapshot)))
            except SelectorError as exc:
                steps.append(_Step(name, plugin, None, Verdict(False, f"invalid pod spec: {exc}", True)))
        return cls(policy, pod, snapshot, steps)

    def with_node(self, node: NodeInfo) -> PreparedPod:
        """States as if the snapshot held ``node`` in place of its node of the same name.

        Cheap: the predicates' ``adjust`` runs on the one node; the snapshot with ``node``
        in it is only materialised if someone reads ``snapshot``.
        """
        old = self._node(node.name)
        if old is node:
            return self
        steps: list[_Step] = []
        for step in self.steps:
            adjust = step.filter.adjust
            if step.error is None and adjust is not None:
                steps.append(_Step(step.name, step.filter, adjust(step.state, self.pod, old, node)))
            else:
                steps.append(step)
        return PreparedPod(self.policy, self.pod, None, steps, parent=self, override=node)

    def first_failure(self, node: NodeInfo | None) -> Verdict | None:
        """The first failing verdict in policy order, or None when the node fits."""
        if node is None or node.node is None:
            return NOT_FOUND
        pod = self.pod
        for _name, check, state in self._active:
            verdict = check(pod, node, state)
            if not verdict.fit:
                return verdict
        return None

    def verdict(self, node: NodeInfo | None) -> Verdict | None:
        """The node's failure as the policy reports it (the first, or all combined), or None."""
        if self.policy.always_check_all_predicates:
            failures = self.failures(node)
            return None if not failures else failures[0] if len(failures) == 1 else combine(failures)
        return self.first_failure(node)

    def cacheable(self) -> bool:
        """False when a node-local filter's state for this pod depends on other nodes (see ``Filter``)."""
        for step in self.steps:
            cacheable = step.filter.cacheable
            if cacheable is not None and step.error is None and not cacheable(step.state):
                return False
        return True

    def layout(self) -> _Layout:
        if self._layout is None:
            families: list[str] = []
            local: list[tuple[CheckFn, Any, int]] = []
            cross: list[CrossStep] = []
            by_name = {step.name: step for step in self.steps}
            signature: list[str] = []
            for name, check, state in self._active:
                step = by_name[name]
                reads = step.filter.node_families
                if reads is None:
                    cross.append((len(local), check, state, step.filter.check_all if step.error is None else None))
                    signature.append(f"cross:{name}")
                    continue
                families.extend(f for f in reads if f not in families)
                local.append((check, state, len(families)))
                signature.append(f"local:{name}:{len(families)}")
            signature.append("families:" + ",".join(families))
            key = fingerprint_key(tuple(families))
            text = "|".join(signature)
            self._layout = _Layout(tuple(families), local, cross, key, layout_tag(text), text)
        return self._layout

    def failures(self, node: NodeInfo | None) -> list[Verdict]:
        """Every failing verdict, in policy order (empty when the node fits)."""
        if node is None or node.node is None:
            return [NOT_FOUND]
        pod = self.pod
        out: list[Verdict] = []
        for _name, check, state in self._active:
            verdict = check(pod, node, state)
            if not verdict.fit:
                out.append(verdict)
        return out

    def evaluate(self, node: NodeInfo | None) -> list[tuple[str, Verdict]]:
        """Every predicate's verdict by name, in policy order (SKIP counts as a fit)."""
        if node is None or node.node is None:
            return [(step.name, NOT_FOUND) for step in self.steps]
        results: dict[str, Verdict] = {}
        for name, check, state in self._active:
            results[name] = check(self.pod, node, state)
        return [(step.name, results.get(step.name, Verdict(True))) for step in self.steps]


def prepare_pod(policy: Policy, pod: PodInfo, snapshot: Snapshot) -> PreparedPod:
    return PreparedPod.build(policy, pod, snapshot)
