"""PodDisruptionBudget accounting for preemption, with kube-scheduler's semantics.

Mirrors DefaultPreemption's ``filterPodsWithPDBViolation``: each budget starts at the PDB's
``status.disruptionsAllowed``; every victim charged against a matching PDB lowers it by one,
and a victim whose charge takes any matching budget below zero violates it. As there:
a PDB only guards pods of its own namespace, a pod without labels matches no PDB, and a
PDB whose selector is missing, empty or invalid matches nothing.

Pods already leaving (deletion timestamp set, or phase Succeeded/Failed) are never charged:
the disruption controller already left them out of ``disruptionsAllowed`` (they are not
healthy pods), just as kube-scheduler skips pods listed in a PDB's ``disruptedPods``.
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
    """The remaining disruptions of every PDB while victims are charged one by one."""

    __slots__ = ("_by_namespace",)

    def __init__(self, pdbs: Iterable[PDBInfo]) -> None:
        # namespace -> [[matcher, remaining allowed]]; mutable pairs so charges update in place.
        self._by_namespace: dict[str, list[list[Any]]] = {}
        for pdb in pdbs:
            matcher = _pdb_matcher(pdb.selector)
            if matcher is not None:
                self._by_namespace.setdefault(pdb.namespace, []).append([matcher, pdb.disruptions_allowed])

    def charge(self, pod: PodInfo) -> bool:
        """Count ``pod`` as evicted; True when that violates one of its PDBs.

        Every matching budget is charged, even after the first violation, as kube-scheduler does.
        """
        if is_leaving(pod) or not pod.labels:
            return False
        violated = False
        for entry in self._by_namespace.get(pod.namespace, ()):
            if entry[0](pod.labels):
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


def count_pdb_violations(pods: Iterable[PodInfo], pdbs: Iterable[PDBInfo]) -> int:
    """How many of ``pods`` (charged in the given order) violate a PDB if all are evicted."""
    budgets = DisruptionBudgets(pdbs)
    return sum(1 for pod in pods if budgets.charge(pod))
