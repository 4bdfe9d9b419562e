"""The preempt verb's decision: kube-scheduler's candidate nodes checked one by one, then the gang rules
applied across them."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from extenders.gang.eviction import GangEviction
from extenders.gang.membership import GangOf
from extenders.model import PodInfo
from extenders.policy import Policy
from extenders.preemption.gangs import GangRules
from extenders.preemption.victims import NEVER, Decision, NodeSelector
from extenders.snapshot import Snapshot

log = logging.getLogger("extenders.preemption")


@dataclass(slots=True)
class MetaVictims:
    """One node of the answer: the victims' UIDs and how many of them violate a PDB."""

    uids: list[str]
    num_pdb_violations: int = 0


@dataclass(slots=True)
class Preemption:
    """The answer: the nodes kept with their victims, and the gangs the extender evicts whole once
    kube-scheduler has evicted their members on the node it picks."""

    nodes: dict[str, MetaVictims] = field(default_factory=dict)
    gang_evictions: list[GangEviction] = field(default_factory=list)
    # The candidate where the preemptor fits once victims already deleted are gone: then no node is
    # answered (see ``NodeSelector``).
    freed: str = ""
    # Earlier gang evictions (their fields) the answered nodes rely on: see ``GangRules.relied``.
    relied: list[str] = field(default_factory=list)


def process_preemption(
    policy: Policy,
    preemptor: PodInfo,
    candidates: Mapping[str, Sequence[str]],
    snapshot: Snapshot,
    *,
    gang_of: GangOf,
    victim_pods: Mapping[str, PodInfo] | None = None,
    departed: Set[str] = frozenset(),
) -> Preemption:
    """The nodes (in candidate order) where preemption also satisfies this extender, with their victims.

    ``candidates`` maps each node kube-scheduler proposes to the UIDs of the victims it
    picked there; ``victim_pods`` holds the full victim pods by UID when they came in
    ``NodeNameToVictims``. ``gang_of(pod)`` tells a pod's gang as ``(key, min_member)``: the
    gang package's rules (``extenders.gang.gang_of_for``). ``departed``: the victims of recent
    answers (see ``NodeSelector``). Never mutates ``snapshot``.
    """
    if preemptor.preemption_policy == NEVER:
        log.info("preempt %s: preemptionPolicy Never, no candidate accepted", preemptor.key)
        return Preemption()
    if not candidates:
        return Preemption()
    selector = NodeSelector(policy, preemptor, snapshot, departed)
    rules = GangRules(selector, gang_of)
    why = rules.cannot_complete()
    if why:
        log.info("preempt %s: no candidate accepted: %s", preemptor.key, why)
        return Preemption()
    decisions: dict[str, Decision] = {}
    siblings = max(0, rules.need() - 1)
    for node_name, uids in candidates.items():
        decision = selector.select(node_name, uids, victim_pods, siblings)
        if selector.freed is not None:
            log.info(
                "preempt %s: no candidate: it fits on %s once victims already deleted there are gone "
                "(kube-scheduler has not seen them go; their deletion retries the pod)",
                preemptor.key,
                selector.freed,
            )
            return Preemption(freed=selector.freed)
        if decision is not None:
            decisions[node_name] = decision
    evictions = rules.apply(decisions)
    for eviction in evictions:
        log.info(
            "preempt %s: gang %s goes whole with its victims on node %s: %d member(s) elsewhere follow",
            preemptor.key,
            eviction.gang,
            eviction.node,
            len(eviction.members),
        )
    nodes = {name: MetaVictims(d.uids, d.num_pdb_violations) for name, d in decisions.items()}
    relied = sorted({f for name in decisions for f in rules.relied.get(name, ())})
    if relied:
        log.info(
            "preempt %s: relies on the gang eviction(s) %s: their members it counts as leaving are still being evicted",
            preemptor.key,
            ", ".join(relied),
        )
    return Preemption(nodes, evictions, relied=relied)
