"""Gangs in preemption: a gang is one victim, and a gang member preempts only when its gang can then complete.

kube-scheduler chooses victims node by node for one pod and knows nothing of gangs. Its candidates
go through these rules:

- A member among a node's victims that takes its gang (at least its minimum placed: bound, or
  permitted and binding) below its minimum takes the whole gang with it: the gang's members on that
  node join the node's victims, and those on other nodes are evicted by the extender once
  kube-scheduler has evicted the ones here (``GangEviction``). Members that recent answers offered as
  victims on other nodes count as leaving for this (kube-scheduler may have picked those nodes). A
  gang with a member of the preemptor's priority or higher cannot go whole, and neither can the node.
  A gang found broken only because an earlier answer's victims there are marked as being evicted is
  not recorded again; the answer relies on the earlier record instead (``GangRules.relied``), so that
  record takes its trigger too should kube-scheduler's eviction of it have failed.
- A gang still assembling is not a victim: a member held at bind may be permitted, its siblings
  bound, between the answer and kube-scheduler's eviction. The node is dropped; once the gang is
  bound whole (or its window closes) the next attempt decides.
- A candidate that breaks no gang is preferred, and the others are dropped. When every candidate
  breaks one, the extender picks the node itself and answers only that one, since kube-scheduler
  cannot see the members elsewhere: the fewest PDB violations, then the lowest highest priority, the
  lowest sum of priorities and the fewest victims, a gang counting once with its priority
  (kube-scheduler's own order of preference), then the candidates' order.
- A gang member preempts only when its gang can then complete: the members it still needs must find
  room on the nodes where the member would fit once every pod of lower priority were gone (a gang
  only as a whole, and only when every member is of lower priority). Otherwise nothing is evicted.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from extenders.gang.eviction import GangEviction, eviction_field
from extenders.gang.filter import keeps_nomination
from extenders.gang.membership import GangOf
from extenders.model import PodInfo
from extenders.pdb import is_leaving, split_by_pdb_violation
from extenders.preemption.inflight import MARKED
from extenders.preemption.victims import Decision, NodeSelector, drop, importance_key
from extenders.snapshot import Snapshot

RULE_GANG_NOT_LOWER = "gang-not-lower-priority"
RULE_GANG_AVOIDABLE = "gang-break-avoidable"
RULE_GANG_NOT_BEST = "gang-break-not-best"
RULE_GANG_ASSEMBLING = "gang-assembling"


@dataclass(slots=True)
class _Whole:
    """A gang a candidate takes whole: its victims on the node and its members elsewhere."""

    gang: str
    priority: int
    minimum: int
    here: list[PodInfo]
    elsewhere: list[PodInfo] = field(default_factory=list)


class GangPlacement:
    """Each gang's live placed members in one snapshot (bound or reserved), counted on first need; and
    its members that count as leaving only because an earlier answer marked them (``with_leaving``)."""

    def __init__(self, snapshot: Snapshot, gang_of: GangOf) -> None:
        self.snapshot = snapshot
        self.gang_of = gang_of

    @functools.cached_property
    def _index(self) -> tuple[dict[str, list[PodInfo]], dict[str, list[PodInfo]]]:
        """Live placed members and marked members, by gang, in one pass over the snapshot."""
        placed: dict[str, list[PodInfo]] = {}
        marked: dict[str, list[PodInfo]] = {}
        for info in self.snapshot.nodes.values():
            for pod in info.pods.values():
                live = not is_leaving(pod)
                ref = self.gang_of(pod) if live or pod.deletion_timestamp == MARKED else None
                if ref is not None:
                    (placed if live else marked).setdefault(ref[0], []).append(pod)
        return placed, marked

    def gangs(self) -> dict[str, list[PodInfo]]:
        return self._index[0]

    def placed(self, gang: str) -> list[PodInfo]:
        return self._index[0].get(gang, [])

    def marked(self, gang: str) -> list[PodInfo]:
        return self._index[1].get(gang, [])


class GangRules:
    """The rules above for one preemptor against one snapshot."""

    def __init__(self, selector: NodeSelector, gang_of: GangOf) -> None:
        self.selector = selector
        self.preemptor = selector.preemptor
        self.snapshot = selector.snapshot
        self.gang_of = gang_of
        self.placement = GangPlacement(self.snapshot, gang_of)
        # Per candidate: the records (fields) of gangs its victims find broken only because earlier
        # answers' marked members are leaving; the answer relies on those members going.
        self.relied: dict[str, set[str]] = {}

    # --- the preemptor's own gang ---------------------------------------------------------------

    @functools.cached_property
    def _own_gang(self) -> tuple[str, int, list[PodInfo]] | None:
        """The preemptor's gang: its key, minimum and placed members (the preemptor aside). A member
        kube-scheduler nominated to a node after preempting for it counts as placed while the node is
        kept for it (from 1.33 its victims go after the cycle, so its siblings preempt meanwhile).
        Worked out once: both rules below read it, and it scans the pending pods."""
        ref = self.gang_of(self.preemptor)
        if ref is None:
            return None
        skip = {self.preemptor.uid}
        placed = [p for p in self.placement.placed(ref[0]) if p.uid not in skip]
        skip.update(p.uid for p in placed)
        nominated = [
            p
            for p in self.snapshot.pending.values()
            if p.nominated_node_name
            and p.uid not in skip
            and not is_leaving(p)
            and (self.gang_of(p) or ("",))[0] == ref[0]
            and keeps_nomination(self.snapshot, p)
        ]
        return ref[0], ref[1], [*placed, *nominated]

    def need(self) -> int:
        """Members of the preemptor's gang still to place, the preemptor included (0 outside a gang)."""
        own = self._own_gang
        return 0 if own is None else max(0, own[1] - len(own[2]))

    def cannot_complete(self) -> str:
        """Why preempting for this member would help its gang nothing ("" when it can help)."""
        own = self._own_gang
        if own is None:
            return ""
        gang, minimum, placed = own
        need = minimum - len(placed)
        if need <= 0:
            return ""
        priority = max([self.preemptor.priority, *(p.priority for p in placed)])
        # Gangs with a member of at least that priority: none of them can be evicted whole.
        protected = {g for g, pods in self.placement.gangs().items() if any(p.priority >= priority for p in pods)}

        def evictable(pod: PodInfo) -> bool:
            if pod.priority >= priority:
                return False
            ref = self.gang_of(pod)
            return ref is None or ref[0] not in protected

        room = 0
        for info in self.snapshot.nodes.values():
            room += self.selector.room(info, evictable)
            if room >= need:
                return ""
        return (
            f"gang {gang} needs {need} more member(s) placed, and even with every pod of lower priority "
            f"evicted there is room for {room}: nothing is preempted"
        )

    # --- the candidates --------------------------------------------------------------------------

    def apply(self, decisions: dict[str, Decision]) -> list[GangEviction]:
        """Expand, drop and choose among ``decisions`` (in place); the evictions the answer implies."""
        wholes: dict[str, list[_Whole]] = {}
        for name in list(decisions):
            found = self._wholes(decisions[name])
            if found is None:
                del decisions[name]
            else:
                wholes[name] = found
        breaking = [name for name in decisions if wholes[name]]
        if not breaking:
            return []
        if len(breaking) < len(decisions):
            for name in breaking:
                gangs = ", ".join(w.gang for w in wholes[name])
                why = f"its victims take gang(s) {gangs} below their minimum; another candidate breaks no gang"
                drop(self.preemptor, name, RULE_GANG_AVOIDABLE, why)
                del decisions[name]
            return []
        order = {name: i for i, name in enumerate(decisions)}
        best = min(decisions, key=lambda n: (self._cost(decisions[n], wholes[n]), order[n]))
        for name in [n for n in decisions if n != best]:
            why = f"every candidate takes a gang whole; node {best} costs least (a gang counted as one victim)"
            drop(self.preemptor, name, RULE_GANG_NOT_BEST, why)
            del decisions[name]
        chosen = decisions[best]
        for whole in wholes[best]:
            taken = set(chosen.uids)
            chosen.add([p for p in whole.here if p.uid not in taken])
        return [
            GangEviction(
                whole.gang,
                best,
                self.preemptor.key,
                tuple(p.uid for p in whole.here),
                tuple((p.uid, p.key) for p in sorted(whole.elsewhere, key=importance_key)),
                whole.minimum,
            )
            for whole in wholes[best]
            if whole.elsewhere
        ]

    def _wholes(self, decision: Decision) -> list[_Whole] | None:
        """The gangs this candidate's victims take below their minimum, each taken whole; None when
        one of them has a member of the preemptor's priority or higher (the node is dropped)."""
        victims: dict[str, list[PodInfo]] = {}
        minimum: dict[str, int] = {}
        for pod in decision.victims:
            ref = None if is_leaving(pod) else self.gang_of(pod)
            if ref is not None:
                victims.setdefault(ref[0], []).append(pod)
                minimum[ref[0]] = ref[1]
        out: list[_Whole] = []
        offered = self.selector.departed
        for gang, gone in victims.items():
            placed = self.placement.placed(gang)
            taken = {p.uid for p in gone}
            # Members an earlier answer offered on another node may be leaving too: kube-scheduler picks
            # one node of an answer and evicts after its cycle, so two preemptors each taking one member
            # can break a gang neither breaks alone. Counted as gone here; the evictor counts what went.
            maybe = sum(1 for p in placed if p.uid in offered and p.uid not in taken)
            if len(placed) < minimum[gang] and any(p.assumed for p in gone):
                # Held at bind while the gang assembles: it may be permitted, and its other members
                # bound, before kube-scheduler evicts these (milliseconds apart), leaving it partly bound.
                why = f"gang {gang} is assembling: members held at bind may be permitted before the victims go"
                drop(self.preemptor, decision.node, RULE_GANG_ASSEMBLING, why)
                return None
            if len(placed) < minimum[gang]:  # broken already
                marked = self.placement.marked(gang)
                if len(placed) + len(marked) >= minimum[gang]:  # but only by members marked as leaving
                    relied = self.relied.setdefault(decision.node, set())
                    relied.update(eviction_field(gang, p.node_name) for p in marked)
                continue
            if len(placed) - len(gone) - maybe >= minimum[gang]:
                continue  # still whole enough without them
            rest = [p for p in placed if p.uid not in taken]
            if any(p.priority >= self.preemptor.priority for p in rest):
                why = f"gang {gang} would have to go whole, and it has a member of this priority or higher"
                drop(self.preemptor, decision.node, RULE_GANG_NOT_LOWER, why)
                return None
            here = [*gone, *(p for p in rest if p.node_name == decision.node)]
            elsewhere = [p for p in rest if p.node_name != decision.node]
            out.append(_Whole(gang, max(p.priority for p in placed), minimum[gang], here, elsewhere))
        return out

    def _cost(self, decision: Decision, wholes: Iterable[_Whole]) -> tuple[int, int, int, int]:
        """kube-scheduler's preference among candidates, with each gang taken whole as one victim."""
        wholes = list(wholes)
        in_gangs = {p.uid for w in wholes for p in w.here}
        units = [p.priority for p in decision.victims if p.uid not in in_gangs] + [w.priority for w in wholes]
        evicted = sorted(
            {p.uid: p for p in (*decision.victims, *(p for w in wholes for p in (*w.here, *w.elsewhere)))}.values(),
            key=importance_key,
        )
        violating, _ = split_by_pdb_violation([p for p in evicted if not is_leaving(p)], self.selector.budgets.copy())
        return len(violating), max(units, default=0), sum(units), len(units)
