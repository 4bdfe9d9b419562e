"""Victims on one candidate node: kube-scheduler's, and those this extender adds.

kube-scheduler picks candidate nodes and victims with its own plugins, which know nothing of what
only the extender counts (resources it was told to ignore, gang quorums). For each candidate we
start from the scheduler's victims and, when the preemptor still does not fit our predicates, add
victims the way DefaultPreemption's ``SelectVictimsOnNode`` chooses them: evict every pod of
strictly lower priority, check the fit, then reprieve as many as possible (PDB-violating pods
first, then the rest, each group most important first), keeping a pod only if the preemptor still
fits with it back.

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
  both keep the scheduler's order, ours after it by name. Releases before 1.32 list the
  PDB-violating victims first, each group so ordered, and read the first all the same
  (``Features.victims_pdb_violating_first``): the order decides the node there too.

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
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime

from extenders import engine
from extenders.model import NodeInfo, PodInfo
from extenders.pdb import DisruptionBudgets, is_leaving, split_by_pdb_violation
from extenders.policy import Policy
from extenders.resources import PODS
from extenders.snapshot import Snapshot

log = logging.getLogger("extenders.preemption")

NEVER = "Never"

# Rule names, as they appear in the logs.
RULE_UNKNOWN_NODE = "unknown-node"
RULE_UNKNOWN_VICTIM = "unknown-victim"
RULE_NO_LOWER_PRIORITY = "no-lower-priority-pods"
RULE_CANNOT_FIT = "cannot-fit"
RULE_NO_VICTIMS = "no-victims"
RULE_ALREADY_FREED = "victims-already-gone"


@dataclass(slots=True)
class Decision:
    """One candidate node as this extender would preempt on it."""

    node: str
    victims: list[PodInfo]  # most important first (PDB-violating ones first when ``pdb_first``)
    violating: set[str]  # uids of the node's potential victims classed as violating a PDB
    pdb_first: bool = False

    def order(self, pod: PodInfo) -> tuple[bool, tuple[int, tuple[int, float]]]:
        """The answer's sort key: ``rank_key``, behind PDB-violation first when ``pdb_first``."""
        return (self.pdb_first and pod.uid not in self.violating), rank_key(pod)

    @property
    def uids(self) -> list[str]:
        return [p.uid for p in self.victims]

    @property
    def num_pdb_violations(self) -> int:
        return sum(1 for p in self.victims if p.uid in self.violating)

    def add(self, pods: Sequence[PodInfo]) -> None:
        """More victims on this node (a gang going whole), kept most important first."""
        self.victims = sorted([*self.victims, *sorted(pods, key=importance_key)], key=self.order)


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


# ---------------------------------------------------------------- per node
class Trial:
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


class NodeSelector:
    """SelectVictimsOnNode for one preemptor, against one snapshot."""

    def __init__(
        self, policy: Policy, preemptor: PodInfo, snapshot: Snapshot, departed: Set[str] = frozenset()
    ) -> None:
        """``departed``: victims of recent answers; one the snapshot no longer holds was deleted since."""
        self.preemptor = preemptor
        self.snapshot = snapshot
        self.departed = departed
        self.prepared = engine.prepare_pod(policy, preemptor, snapshot)
        self.budgets = DisruptionBudgets(snapshot.pdbs.values())
        self.nominated = snapshot.nominated()
        # A candidate whose proposed victims are all gone already and where the preemptor then fits:
        # no preemption is needed anywhere (see ``_select``).
        self.freed: str | None = None

    def fits(self, trial: Trial) -> bool:
        """RunFilterPluginsWithNominatedPods: the preemptor fits with the nominated pods, and without."""
        grown = trial.grown
        if grown is not None and self.prepared.with_node(grown).first_failure(grown) is not None:
            return False
        node = trial.node
        return self.prepared.with_node(node).first_failure(node) is None

    def _nominated(self, info: NodeInfo) -> list[PodInfo]:
        """The pods nominated to ``info`` that the preemptor must leave room for."""
        if not self.nominated:
            return []
        return engine.nominated_to_add(self.preemptor, info, self.nominated, self.snapshot)

    def room(self, info: NodeInfo, evictable: Callable[[PodInfo], bool]) -> int:
        """How many pods like the preemptor the node could take once every ``evictable`` pod is gone
        (0 when not even one fits): what preempting there could do for the preemptor's gang."""
        if info.node is None:
            return 0
        keep = [p for p in info.pods.values() if not is_leaving(p) and not evictable(p)]
        trial = Trial(info, keep, self._nominated(info))
        if not self.fits(trial):
            return 0
        node = trial.grown or trial.node
        copies = [node.allocatable.get(PODS, 0) - len(node.pods)]
        for resource, amount in self.preemptor.requests.items():
            if resource != PODS and amount > 0:
                copies.append((node.allocatable.get(resource, 0) - node.requested.get(resource, 0)) // amount)
        return max(1, min(copies))

    def select(
        self, node_name: str, uids: Sequence[str], victim_pods: Mapping[str, PodInfo] | None, siblings: int = 0
    ) -> Decision | None:
        """The node's victims, or None (logged) when it cannot be used. ``siblings``: members of the
        preemptor's gang still to place besides it: room is made for as many of them as the node can
        hold once its lower-priority pods are gone (the gang's need, not one member's), or else for the
        preemptor alone."""
        info = self.snapshot.nodes.get(node_name)
        if siblings > 0 and info is not None:
            extra = min(siblings, self.room(info, lambda p: p.priority < self.preemptor.priority) - 1)
            if extra > 0:
                decision = self._select(node_name, uids, victim_pods, extra, report=False)
                if decision is not None:
                    return decision
        return self._select(node_name, uids, victim_pods, 0, report=True)

    def _siblings(self, node: str, count: int) -> list[PodInfo]:
        """Stand-ins for members of the preemptor's gang on ``node`` (shaped like the preemptor)."""
        pod = self.preemptor
        return [
            dataclasses.replace(pod, uid=f"{pod.uid}~sibling-{i}", name=f"{pod.name}~{i}", node_name=node)
            for i in range(count)
        ]

    def _select(
        self,
        node_name: str,
        uids: Sequence[str],
        victim_pods: Mapping[str, PodInfo] | None,
        siblings: int,
        report: bool,
    ) -> Decision | None:
        preemptor = self.preemptor

        def drop_node(rule: str, why: str) -> None:
            if report:
                drop(preemptor, node_name, rule, why)

        info = self.snapshot.nodes.get(node_name)
        if info is None or info.node is None:
            drop_node(RULE_UNKNOWN_NODE, "the snapshot has no such node")
            return None
        scheduler_victims: list[PodInfo] = []
        gone: list[PodInfo] = []  # the scheduler's victims deleted since an earlier answer named them
        seen: set[str] = set()
        for uid in uids:
            if uid in seen:
                continue
            seen.add(uid)
            pod = info.pods.get(uid)
            full = victim_pods.get(uid) if victim_pods else None
            if pod is None and uid in self.departed and self.snapshot.find_pod(uid) is None:
                # kube-scheduler (1.33 on) retries the preemptor before its cache drops the victims it
                # evicted: the same node again, with them. Our view is newer, not older: they free
                # nothing more, and are answered only when no other victim is left (deleting one
                # already gone emits no event, and kube-scheduler waits for its last victim's).
                departed = full or PodInfo(namespace="", name=uid, uid=uid)
                gone.append(dataclasses.replace(departed, deletion_timestamp=departed.deletion_timestamp or "deleted"))
                continue
            if pod is None or (full is not None and full.node_name and full.node_name != node_name):
                what = f"{full.key} ({uid})" if full is not None else uid
                drop_node(RULE_UNKNOWN_VICTIM, f"victim {what} is not on this node in the snapshot")
                return None
            scheduler_victims.append(pod)

        # Every potential victim, most important first, classed by PDB once (filterPodsWithPDBViolation).
        live = [p for p in info.pods.values() if not is_leaving(p)]
        potential = [p for p in live if p.uid in seen or p.priority < preemptor.priority]
        potential.sort(key=importance_key)
        violating, others = split_by_pdb_violation(potential, self.budgets.copy())
        violating_uids = {p.uid for p in violating}

        # The node as it will be: scheduler's victims evicted, leaving pods gone.
        trial = Trial(info, [p for p in live if p.uid not in seen], self._nominated(info))
        for sibling in self._siblings(node_name, siblings):
            trial.add(sibling)
        if self.fits(trial):
            if not scheduler_victims and not gone:
                drop_node(RULE_NO_VICTIMS, "fits without evicting anything; an empty list is refused")
                return None
            if not scheduler_victims:
                # Every victim kube-scheduler proposes went with an earlier preemption, which its cache
                # has not seen yet, and the preemptor fits without them. Preempting them again deletes
                # nothing and so emits no event: kube-scheduler (1.33 on, its preemptor gated while the
                # preemption runs) could then leave the pod parked. Preempting elsewhere would evict pods
                # for nothing. With no candidate the pod waits as unschedulable, and the deletion its
                # cache has yet to see moves it on.
                self.freed = node_name
                drop_node(RULE_ALREADY_FREED, "fits once victims already deleted are gone")
                return None
            return self._decision(node_name, scheduler_victims, [], violating_uids)

        lower = [p for p in trial.node.pods.values() if p.priority < preemptor.priority]
        if not lower:
            drop_node(RULE_NO_LOWER_PRIORITY, "does not fit and no lower-priority pod is left")
            return None
        for pod in lower:
            trial.remove(pod.uid)
        if not self.fits(trial):
            drop_node(RULE_CANNOT_FIT, "does not fit even with every lower-priority pod evicted")
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
            drop_node(RULE_NO_VICTIMS, "no victim left after reprieves")
            return None
        if added:
            log.info(
                "preempt %s: node %s needs %d victim(s) beyond the scheduler's %d%s: %s",
                preemptor.key,
                node_name,
                len(added),
                len(scheduler_victims),
                f" (room for {siblings} more member(s) of its gang too)" if siblings else "",
                ", ".join(p.key for p in added),
            )
        return self._decision(node_name, scheduler_victims, added, violating_uids)

    def _decision(
        self, node: str, scheduler_victims: list[PodInfo], added: list[PodInfo], violating: set[str]
    ) -> Decision:
        """Victims most important first; a stable sort, so ties keep the scheduler's order, then ours by name."""
        decision = Decision(node, [], violating, self.snapshot.features.victims_pdb_violating_first)
        decision.victims = sorted([*scheduler_victims, *sorted(added, key=importance_key)], key=decision.order)
        return decision


def drop(preemptor: PodInfo, node: str, rule: str, why: str) -> None:
    log.info("preempt %s: dropped node %s (rule %s): %s", preemptor.key, node, rule, why)
