"""The preempt verb: which of kube-scheduler's candidate nodes also work for this extender.

kube-scheduler picks candidate nodes and victims with its own plugins, which know nothing
of what only the extender counts (resources it was told to ignore, gang quorums). For each
candidate we start from the scheduler's victims and, when the preemptor still does not fit
our predicates, add victims the way DefaultPreemption's ``SelectVictimsOnNode`` chooses them:
evict every pod of strictly lower priority, check the fit, then reprieve as many as
possible (PDB-violating pods first, then the rest, each group most important first),
keeping a pod only if the preemptor still fits with it back.

As there (see also ``extenders.pdb``):
- Which pods violate a PDB is decided once per node, over every potential victim (the
  scheduler's victims and every lower-priority pod) taken most important first, each PDB
  starting from its ``disruptionsAllowed``. ``NumPDBViolations`` counts the victims so
  classed; a victim classed violating stays counted even when a pod charged before it is
  reprieved, as kube-scheduler counts it.
- Every fit check counts the pods nominated to the node (``Snapshot.nominated``) of at
  least the preemptor's priority, and must pass both with and without them.
- Victims are listed most important first (higher priority, then earlier start): kube-scheduler
  reads the first as the node's most important victim when it picks a node. Victims equal in
  both keep the scheduler's order, ours after it by name.

Decisions:
- The scheduler's victims are never reprieved (its own plugins needed them gone).
- Pods already leaving (deletion timestamp, or Succeeded/Failed) are taken as gone before
  any fit check: their resources are already being freed, so evicting them again frees
  nothing more; they are never added as victims and never count as PDB violations. A
  scheduler victim that is leaving stays in the answer (harmless) but counts for nothing.
- The node is dropped (logged with the rule's name) when: the snapshot does not know it;
  a scheduler victim is not among the snapshot's pods on that node (our view of the node
  is then stale and we cannot vouch for a fit computed on it); the preemptor does not fit
  even without every lower-priority pod; or the answer would have no victim at all
  (kube-scheduler refuses a whole answer with an empty victim list).
- Gangs: a node whose victims take a gang (by the snapshot's live bound members) from
  at least its minimum to below it "breaks" that gang. Nodes breaking a gang are dropped
  when another candidate breaks none; when all break some, only those breaking the
  fewest gangs stay.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from extenders import engine
from extenders.gang.membership import GangOf
from extenders.model import NodeInfo, PodInfo
from extenders.pdb import DisruptionBudgets, is_leaving, split_by_pdb_violation
from extenders.policy import Policy
from extenders.snapshot import Snapshot

log = logging.getLogger("extenders.preemption")

NEVER = "Never"

# Rule names, as they appear in the logs.
RULE_UNKNOWN_NODE = "unknown-node"
RULE_UNKNOWN_VICTIM = "unknown-victim"
RULE_NO_LOWER_PRIORITY = "no-lower-priority-pods"
RULE_CANNOT_FIT = "cannot-fit"
RULE_NO_VICTIMS = "no-victims"
RULE_GANG_AVOIDABLE = "gang-break-avoidable"
RULE_GANG_FEWEST = "gang-break-not-fewest"


@dataclass(slots=True)
class MetaVictims:
    """One node of the answer: the victims' UIDs and how many of them violate a PDB."""

    uids: list[str]
    num_pdb_violations: int = 0


@dataclass(slots=True)
class _Decision:
    victims: list[PodInfo]  # most important first
    num_pdb_violations: int
    broken_gangs: set[str] = field(default_factory=set)

    @property
    def uids(self) -> list[str]:
        return [p.uid for p in self.victims]


# ---------------------------------------------------------------- ordering
def _start_key(pod: PodInfo) -> tuple[int, float]:
    """Earlier start first; a pod without a (parsable) start time counts as starting now, i.e. last."""
    if pod.start_time:
        try:
            return 0, datetime.fromisoformat(pod.start_time).timestamp()
        except ValueError:
            pass
    return 1, 0.0


def rank_key(pod: PodInfo) -> tuple[int, tuple[int, float]]:
    """kube-scheduler's MoreImportantPod as a sort key: higher priority, then earlier start, first."""
    return -pod.priority, _start_key(pod)


def importance_key(pod: PodInfo) -> tuple[int, tuple[int, float], str, str]:
    """``rank_key``, then the name: deterministic where kube-scheduler's unstable sort is not."""
    return -pod.priority, _start_key(pod), pod.namespace, pod.name


# ---------------------------------------------------------------- gangs
class _GangCounter:
    """Live bound members per gang in the snapshot, counted once and only when a victim has a gang."""

    def __init__(self, snapshot: Snapshot, gang_of: GangOf) -> None:
        self.snapshot = snapshot
        self.gang_of = gang_of
        self._bound: dict[str, int] | None = None

    def bound(self) -> dict[str, int]:
        if self._bound is None:
            counts: dict[str, int] = {}
            for info in self.snapshot.nodes.values():
                for pod in info.pods.values():
                    if is_leaving(pod):
                        continue
                    ref = self.gang_of(pod)
                    if ref is not None:
                        counts[ref[0]] = counts.get(ref[0], 0) + 1
            self._bound = counts
        return self._bound

    def broken_by(self, victims: Iterable[PodInfo]) -> set[str]:
        """Gangs that have at least their minimum bound now and fewer once ``victims`` go."""
        evicted: dict[str, int] = {}
        minimum: dict[str, int] = {}
        for pod in victims:
            if is_leaving(pod):
                continue
            ref = self.gang_of(pod)
            if ref is None:
                continue
            evicted[ref[0]] = evicted.get(ref[0], 0) + 1
            minimum[ref[0]] = ref[1]
        if not evicted:
            return set()
        bound = self.bound()
        return {
            key
            for key, gone in evicted.items()
            if bound.get(key, 0) >= minimum[key] and bound.get(key, 0) - gone < minimum[key]
        }


# ---------------------------------------------------------------- per node
class _Trial:
    """A node as a preemption would leave it, and the same with the nominated pods it must keep room for.

    Both copies get every eviction and reprieve, so a fit check never rebuilds a node.
    """

    __slots__ = ("grown", "node")

    def __init__(self, info: NodeInfo, pods: Sequence[PodInfo], nominated: Sequence[PodInfo]) -> None:
        self.node = NodeInfo.build(info.name, info.node, pods, info.generation)
        self.grown = engine.with_pods(self.node, nominated) if nominated else None

    def add(self, pod: PodInfo) -> None:
        self.node.add_pod(pod)
        if self.grown is not None:
            self.grown.add_pod(pod)

    def remove(self, uid: str) -> None:
        self.node.remove_pod(uid)
        if self.grown is not None:
            self.grown.remove_pod(uid)


class _NodeSelector:
    """SelectVictimsOnNode for one preemptor, against one snapshot."""

    def __init__(self, policy: Policy, preemptor: PodInfo, snapshot: Snapshot) -> None:
        self.preemptor = preemptor
        self.snapshot = snapshot
        self.prepared = engine.prepare_pod(policy, preemptor, snapshot)
        self.budgets = DisruptionBudgets(snapshot.pdbs.values())
        self.nominated = snapshot.nominated()

    def fits(self, trial: _Trial) -> bool:
        """RunFilterPluginsWithNominatedPods: the preemptor fits with the nominated pods, and without."""
        grown = trial.grown
        if grown is not None and self.prepared.with_node(grown).first_failure(grown) is not None:
            return False
        node = trial.node
        return self.prepared.with_node(node).first_failure(node) is None

    def select(
        self, node_name: str, uids: Sequence[str], victim_pods: Mapping[str, PodInfo] | None
    ) -> _Decision | None:
        preemptor = self.preemptor
        info = self.snapshot.nodes.get(node_name)
        if info is None or info.node is None:
            _drop(preemptor, node_name, RULE_UNKNOWN_NODE, "the snapshot has no such node")
            return None
        scheduler_victims: list[PodInfo] = []
        seen: set[str] = set()
        for uid in uids:
            if uid in seen:
                continue
            seen.add(uid)
            pod = info.pods.get(uid)
            full = victim_pods.get(uid) if victim_pods else None
            if pod is None or (full is not None and full.node_name and full.node_name != node_name):
                what = f"{full.key} ({uid})" if full is not None else uid
                _drop(preemptor, node_name, RULE_UNKNOWN_VICTIM, f"victim {what} is not on this node in the snapshot")
                return None
            scheduler_victims.append(pod)

        # Every potential victim, most important first, classed by PDB once (filterPodsWithPDBViolation).
        live = [p for p in info.pods.values() if not is_leaving(p)]
        potential = [p for p in live if p.uid in seen or p.priority < preemptor.priority]
        potential.sort(key=importance_key)
        violating, others = split_by_pdb_violation(potential, self.budgets.copy())
        violating_uids = {p.uid for p in violating}

        # The node as it will be: scheduler's victims evicted, leaving pods gone.
        nominated = engine.nominated_to_add(preemptor, info, self.nominated, self.snapshot) if self.nominated else []
        trial = _Trial(info, [p for p in live if p.uid not in seen], nominated)
        if self.fits(trial):
            if not scheduler_victims:
                _drop(preemptor, node_name, RULE_NO_VICTIMS, "fits without evicting anything; an empty list is refused")
                return None
            return self._decision(scheduler_victims, [], violating_uids)

        lower = [p for p in trial.node.pods.values() if p.priority < preemptor.priority]
        if not lower:
            _drop(preemptor, node_name, RULE_NO_LOWER_PRIORITY, "does not fit and no lower-priority pod is left")
            return None
        for pod in lower:
            trial.remove(pod.uid)
        if not self.fits(trial):
            _drop(preemptor, node_name, RULE_CANNOT_FIT, "does not fit even with every lower-priority pod evicted")
            return None

        added: list[PodInfo] = []
        for pod in (*violating, *others):
            if pod.uid in seen:  # the scheduler's victims go in any case
                continue
            trial.add(pod)
            if not self.fits(trial):
                trial.remove(pod.uid)
                added.append(pod)
        if not scheduler_victims and not added:  # cannot happen (the node did not fit with all of them)
            _drop(preemptor, node_name, RULE_NO_VICTIMS, "no victim left after reprieves")
            return None
        if added:
            log.info(
                "preempt %s: node %s needs %d victim(s) beyond the scheduler's %d: %s",
                preemptor.key,
                node_name,
                len(added),
                len(scheduler_victims),
                ", ".join(p.key for p in added),
            )
        return self._decision(scheduler_victims, added, violating_uids)

    @staticmethod
    def _decision(scheduler_victims: list[PodInfo], added: list[PodInfo], violating: set[str]) -> _Decision:
        """Victims most important first; a stable sort, so ties keep the scheduler's order, then ours by name."""
        victims = sorted([*scheduler_victims, *sorted(added, key=importance_key)], key=rank_key)
        return _Decision(victims, sum(1 for p in victims if p.uid in violating))


def _drop(preemptor: PodInfo, node: str, rule: str, why: str) -> None:
    log.info("preempt %s: dropped node %s (rule %s): %s", preemptor.key, node, rule, why)


# ---------------------------------------------------------------- entry point
def process_preemption(
    policy: Policy,
    preemptor: PodInfo,
    candidates: Mapping[str, Sequence[str]],
    snapshot: Snapshot,
    *,
    gang_of: GangOf,
    victim_pods: Mapping[str, PodInfo] | None = None,
) -> dict[str, MetaVictims]:
    """The nodes (in candidate order) where preemption also satisfies this extender, with their victims.

    ``candidates`` maps each node kube-scheduler proposes to the UIDs of the victims it
    picked there; ``victim_pods`` holds the full victim pods by UID when they came in
    ``NodeNameToVictims``. ``gang_of(pod)`` tells a pod's gang as ``(key, min_member)``: the
    gang package's rules (``extenders.gang.gang_of_for``). Never mutates ``snapshot``.
    """
    if preemptor.preemption_policy == NEVER:
        log.info("preempt %s: preemptionPolicy Never, no candidate accepted", preemptor.key)
        return {}
    if not candidates:
        return {}
    selector = _NodeSelector(policy, preemptor, snapshot)
    decisions: dict[str, _Decision] = {}
    for node_name, uids in candidates.items():
        decision = selector.select(node_name, uids, victim_pods)
        if decision is not None:
            decisions[node_name] = decision

    _apply_gang_rules(preemptor, decisions, _GangCounter(snapshot, gang_of))

    return {name: MetaVictims(d.uids, d.num_pdb_violations) for name, d in decisions.items()}


def _apply_gang_rules(preemptor: PodInfo, decisions: dict[str, _Decision], counter: _GangCounter) -> None:
    """Drop candidates that strand a gang when a better candidate exists (in place)."""
    for decision in decisions.values():
        decision.broken_gangs = counter.broken_by(decision.victims)
    if not decisions:
        return
    fewest = min(len(d.broken_gangs) for d in decisions.values())
    rule = RULE_GANG_AVOIDABLE if fewest == 0 else RULE_GANG_FEWEST
    for name in [n for n, d in decisions.items() if len(d.broken_gangs) > fewest]:
        gangs = ", ".join(sorted(decisions[name].broken_gangs))
        if fewest == 0:
            why = f"its victims take gang(s) {gangs} below their minimum; another candidate breaks no gang"
        else:
            count = len(decisions[name].broken_gangs)
            why = f"its victims take {count} gang(s) ({gangs}) below their minimum; others break only {fewest}"
        _drop(preemptor, name, rule, why)
        del decisions[name]


# ---------------------------------------------------------------- wire helpers
def to_wire(result: Mapping[str, MetaVictims]) -> dict[str, Any]:
    """The extender/v1 ExtenderPreemptionResult body for ``result``."""
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in meta.uids], "NumPDBViolations": meta.num_pdb_violations}
            for node, meta in result.items()
        }
    }
