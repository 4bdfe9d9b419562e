"""PodDisruptionBudget accounting for preemption, with kube-scheduler's semantics.

Mirrors DefaultPreemption's ``filterPodsWithPDBViolation``: each budget starts at the PDB's
``status.disruptionsAllowed``; every pod charged against a matching PDB lowers it by one, and
a pod whose charge takes any matching budget below zero violates it. As there: a PDB only
guards pods of its own namespace, a pod without labels matches no PDB, a PDB whose selector
is missing, empty or invalid matches nothing, and a pod named in the PDB's
``status.disruptedPods`` is not charged against it (its eviction is already counted).

Pods already leaving (deletion timestamp set, or phase Succeeded/Failed) are never charged:
the disruption controller already left them out of ``disruptionsAllowed`` (they are not
healthy pods), and preemption takes them as gone rather than as victims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from extenders.labels import LabelMatcher, SelectorError, compile_label_selector
from extenders.model import PDBInfo, PodInfo


def is_leaving(pod: PodInfo) -> bool:
    """True when the pod goes away without being evicted: terminating or already finished."""
    return pod.terminating or pod.terminal


def _pdb_matcher(selector: Mapping[str, Any]) -> LabelMatcher | None:
    """A PDB's selector, or None when it matches nothing (kube-scheduler skips empty selectors)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return None
    try:
        return compile_label_selector(selector)
    except SelectorError:
        return None


def pdb_matches(pdb: PDBInfo, pod: PodInfo) -> bool:
    """Whether ``pdb`` guards ``pod`` in the sense of kube-scheduler's preemption."""
    if pdb.namespace != pod.namespace or not pod.labels:
        return False
    matcher = _pdb_matcher(pdb.selector)
    return matcher is not None and matcher(pod.labels)


class DisruptionBudgets:
    """The remaining disruptions of every PDB while pods are charged one by one."""

    __slots__ = ("_by_namespace",)

    def __init__(self, pdbs: Iterable[PDBInfo]) -> None:
        # namespace -> [[matcher, remaining allowed, disrupted pod names]]; mutable so charges update in place.
        self._by_namespace: dict[str, list[list[Any]]] = {}
        for pdb in pdbs:
            matcher = _pdb_matcher(pdb.selector)
            if matcher is not None:
                entry = [matcher, pdb.disruptions_allowed, pdb.disrupted_pods]
                self._by_namespace.setdefault(pdb.namespace, []).append(entry)

    def copy(self) -> DisruptionBudgets:
        """Budgets in the same state, charged independently: selectors are compiled once per request."""
        out = DisruptionBudgets(())
        out._by_namespace = {ns: [list(entry) for entry in entries] for ns, entries in self._by_namespace.items()}
        return out

    def charge(self, pod: PodInfo) -> bool:
        """Count ``pod`` as evicted; True when that violates one of its PDBs.

        Every matching budget is charged, even after the first violation, as kube-scheduler does.
        """
        if is_leaving(pod) or not pod.labels:
            return False
        violated = False
        for entry in self._by_namespace.get(pod.namespace, ()):
            if pod.name in entry[2] or not entry[0](pod.labels):
                continue
            entry[1] -= 1
            if entry[1] < 0:
                violated = True
        return violated


def split_by_pdb_violation(pods: Iterable[PodInfo], budgets: DisruptionBudgets) -> tuple[list[PodInfo], list[PodInfo]]:
    """(violating, non-violating) in the given order, charging ``budgets`` as it goes."""
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for pod in pods:
        (violating if budgets.charge(pod) else others).append(pod)
    return violating, others
