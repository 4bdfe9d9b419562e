"""The prioritize verb: the policy's priorities, normalised, weighted and averaged into 0..10 per node."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress, repeat
from operator import add, attrgetter, is_, lt, mul, truediv
from typing import Any, cast

from extenders.engine.score_cache import ScoreCounts, cached_raw
from extenders.equivalence import ClassMemo
from extenders.equivalence.groups import cached_groups
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import MAX_PRIORITY, ConstantScore, Scorer, ScoringContext
from extenders.plugins.registry import SCORERS, VETO_SCORERS
from extenders.policy import Policy
from extenders.snapshot import Snapshot

# A priority's part of the average: its weight, and its normalised score per node (None: the same
# score, the third item, for every node).
Contribution = tuple[int, list[float] | None, float]
_NODE = attrgetter("node")


def _context(policy: Policy, snapshot: Snapshot | None = None) -> ScoringContext:
    return ScoringContext(
        resource_weights=dict(policy.resource_weights),
        hard_pod_affinity_symmetric_weight=policy.hard_pod_affinity_symmetric_weight,
        summary=snapshot.summary() if snapshot is not None else None,
    )


def score_nodes(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    infos: list[NodeInfo],
    detail: bool,
    memo: ClassMemo | None = None,
    counts: ScoreCounts | None = None,
) -> tuple[dict[str, int], dict[str, dict[str, dict[str, float]]]]:
    """Each node's score (0..10), and with ``detail`` each priority's raw and normalised score per node.

    Each priority's raw scores are normalised over the candidates to 0..10, multiplied by its weight
    and summed; the sum is divided by the sum of the weights and rounded half up, so the extender's
    answer stays within 0..MaxExtenderPriority (10) and kube-scheduler applies the extender's own
    weight on top. A priority that gives every candidate the same score cannot change the ranking and
    is left out of the average (unless all are), so the priorities that do tell nodes apart keep the
    whole 0..10 range.

    Veto scorers (``VETO_SCORERS``: NodePreferAvoidPods) are not part of that average. Classic
    policies weight NodePreferAvoidPods 10000 so that, *added* to the others, it dominates them;
    averaged, it would flatten every other priority into the rounding. Here, when the policy lists a
    veto priority, a node it scores below MAX (a node that asks to avoid this pod) scores 0, and
    every other node scores the average of the remaining priorities but at least 1. An avoided node
    therefore always ends up strictly below any node that is not avoided, and the other priorities
    still rank the nodes; the veto priority's weight is accepted (classic files say 10000) but not used.

    ``memo`` (the pod's class, admitted): raw scores of node-local scorers are reused from it and
    kept in it; ``counts`` then says how many were.
    """
    names = [info.name for info in infos]
    unique = list(dict.fromkeys(names))
    details: dict[str, dict[str, dict[str, float]]] = {n: {} for n in unique} if detail else {}
    if not policy.priority_weights or not infos:
        return dict.fromkeys(names, 0), details
    contributions, vetoed = _contributions(
        policy, pod, snapshot, infos, names, unique, details if detail else None, memo, counts
    )
    return dict(zip(unique, _combine(contributions, vetoed, names, unique), strict=True)), details


def _contributions(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    infos: list[NodeInfo],
    names: list[str],
    unique: list[str],
    details: dict[str, dict[str, dict[str, float]]] | None,
    memo: ClassMemo | None,
    counts: ScoreCounts | None,
) -> tuple[list[Contribution], set[str] | None]:
    """Each averaged priority's weight and normalised scores (in ``unique``'s order; None with the
    constant when it scores every node alike), and the names a veto priority avoids (None: the policy
    has none). ``details``: filled with each priority's raw and normalised score per node."""
    ctx = _context(policy, snapshot)
    vetoed: set[str] | None = None
    contributions: list[Contribution] = []
    prepared: list[tuple[str, int, Scorer, Any, ConstantScore | None]] = []
    for prio_name, weight in policy.priority_weights:
        scorer = SCORERS[prio_name]
        state = scorer.prepare(pod, snapshot, infos, ctx)
        constant_of = scorer.constant
        prepared.append(
            (prio_name, weight, scorer, state, constant_of(pod, snapshot, infos, state, ctx) if constant_of else None)
        )
    cached: dict[str, list[float]] = {}  # raw scores of the node-local scorers, through the class's memo
    if memo is not None:
        variable = ((prio_name, scorer, state) for prio_name, _, scorer, state, fixed in prepared if fixed is None)
        for group in cached_groups(variable):
            raws = cached_raw(group, pod, infos, names, ctx, memo, counts or ScoreCounts())
            cached.update(zip(group.names, raws, strict=True))
    for prio_name, weight, scorer, state, fixed in prepared:
        if fixed is not None:
            raw_value, value = fixed
            if prio_name in VETO_SCORERS:
                vetoed = vetoed if vetoed is not None else set()
                if value < MAX_PRIORITY:
                    vetoed.update(unique)
            else:
                contributions.append((weight, None, value))
            if details is not None:
                for name in unique:
                    details[name][prio_name] = {"raw": raw_value, "score": value}
            continue
        raw_values = cached.get(prio_name)
        if raw_values is None:
            score_all = scorer.score_all
            if score_all is not None:
                raw_values = score_all(pod, infos, state, ctx)
            else:
                score = scorer.score
                raw_values = [score(pod, info, state, ctx) for info in infos]
        normalize_values = scorer.normalize_values
        if normalize_values is not None and details is None and len(unique) == len(names):
            values = normalize_values(raw_values, state)  # one name each: the lists line up with ``unique``
        else:
            raw = dict(zip(names, raw_values, strict=True))
            normalized = scorer.normalize(raw, state)
            values = list(map(normalized.get, unique, repeat(0.0)))
            if details is not None:
                for name, value in zip(unique, values, strict=True):
                    details[name][prio_name] = {"raw": raw[name], "score": value}
        if prio_name in VETO_SCORERS:
            vetoed = vetoed if vetoed is not None else set()
            vetoed.update(compress(unique, map(lt, values, repeat(MAX_PRIORITY))))
        else:
            contributions.append((weight, values, 0.0))
    return contributions, vetoed


def _combine(
    contributions: list[Contribution], vetoed: set[str] | None, names: list[str], unique: list[str]
) -> list[int]:
    """The weighted average of ``contributions``, rounded half up into 0..MAX, in ``unique``'s order."""
    # A priority that scores every candidate alike cannot change the ranking; leaving it out of the
    # average keeps the whole 0..10 range for the priorities that do tell the candidates apart.
    varying = [c for c in contributions if c[1] is not None and c[1].count(c[1][0]) != len(c[1])]
    used = varying or contributions
    weight_sum = sum(w for w, _, _ in used)
    totals: list[float] | None = None
    if len(unique) == len(names):
        for weight, scores, value in used:
            if scores is None:
                product = weight * value
                totals = [t + product for t in totals] if totals is not None else [product] * len(unique)
            elif totals is None:  # 0.0 + x is x: the first term needs no sum
                totals = list(map(mul, repeat(weight), scores))
            else:
                totals = list(map(add, totals, map(mul, repeat(weight), scores)))
    else:
        # A name listed twice adds its scores twice (as before this loop was vectorised).
        totals = [0.0] * len(unique)
        position = {name: i for i, name in enumerate(unique)}
        for weight, scores, value in used:
            for name in names:
                i = position[name]
                totals[i] += weight * (value if scores is None else scores[i])
    if weight_sum and totals is not None:
        final = _rounded(list(map(truediv, totals, repeat(weight_sum))))
    else:
        final = [0] * len(unique)
    if vetoed is not None:
        final = [0 if n in vetoed else (s or 1) for n, s in zip(unique, final, strict=True)]  # s or 1: max(1, s)
    return final


def _rounded(averages: list[float]) -> list[int]:
    """Each average rounded half up into 0..MAX. Averages of scores in 0..MAX are in range already:
    they are rounded in C, and only a plug-in's out-of-range (or not a number) score takes the checks."""
    try:
        final = list(map(int, map(add, averages, repeat(0.5))))
    except (ValueError, OverflowError):  # NaN or infinity
        pass
    else:
        if final and min(final) >= 0 and max(final) <= MAX_PRIORITY:
            return final
    return [((r if (r := int(v + 0.5)) < MAX_PRIORITY else MAX_PRIORITY) if v >= 0 else 0) for v in averages]


def prioritize_nodes(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    node_names: Iterable[str],
    memo: ClassMemo | None = None,
    counts: ScoreCounts | None = None,
) -> list[tuple[str, int]]:
    """(host, score 0..10) for every requested node, in request order; unknown nodes score 0.

    With ``memo`` (the pod's class), raw scores of node-local scorers are reused once the class is
    admitted; ``counts`` then says how many were reused and computed. (No node-local scorer leaves
    the pod itself out, so unlike filter verdicts its raw scores hold wherever the pod is.)
    """
    names = list(node_names)
    if len(set(names)) == len(names):
        return list(zip(names, prioritize_values(policy, pod, snapshot, names, memo, counts), strict=True))
    scores = _known_scores(policy, pod, snapshot, list(map(snapshot.nodes.get, names)), memo, counts)
    return [(n, scores.get(n, 0)) for n in names]


def prioritize_values(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    names: list[str],
    memo: ClassMemo | None = None,
    counts: ScoreCounts | None = None,
) -> list[int]:
    """``prioritize_nodes``' scores alone, in the order of ``names``, each named once (as the wire's
    validation and filter's answer guarantee). When every name is a known node, the scores are made in
    that order from the start, with no mapping built by name (this runs over every candidate of every pod)."""
    found = list(map(snapshot.nodes.get, names))
    if any(map(is_, found, repeat(None))) or any(map(is_, map(_NODE, found), repeat(None))):
        scores = _known_scores(policy, pod, snapshot, found, memo, counts)
        return list(map(scores.get, names, repeat(0)))
    if not policy.priority_weights or not found:
        return [0] * len(names)
    infos = cast(list[NodeInfo], found)
    memo = memo if memo is not None and memo.admitted else None
    contributions, vetoed = _contributions(policy, pod, snapshot, infos, names, names, None, memo, counts)
    return _combine(contributions, vetoed, names, names)


def _known_scores(
    policy: Policy,
    pod: PodInfo,
    snapshot: Snapshot,
    found: list[NodeInfo | None],
    memo: ClassMemo | None,
    counts: ScoreCounts | None,
) -> dict[str, int]:
    """The scores of the nodes among ``found`` that the snapshot knows, by name."""
    infos = [info for info in found if info is not None and info.node is not None]
    memo = memo if memo is not None and memo.admitted else None
    scores, _ = score_nodes(policy, pod, snapshot, infos, detail=False, memo=memo, counts=counts)
    return scores
