"""Raw scores of node-local scorers through the equivalence cache, one entry per node and scorer group."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, eq, itemgetter, not_
from typing import Any

from extenders.equivalence import ClassMemo, digests, fingerprint_key, fingerprints
from extenders.equivalence.groups import ScorerGroup
from extenders.equivalence.packing import unpack_scores
from extenders.model import NodeInfo, PodInfo
from extenders.plugins.framework import ScoringContext

_VERSION = attrgetter("version")
_SCORES = itemgetter(1)  # of a ScoreEntry
_NO_ENTRY: tuple[Any, tuple[float, ...]] = (None, ())  # a node without an entry: its row is filled below


@dataclass(slots=True)
class ScoreCounts:
    """Raw scores of node-local scorers taken from the equivalence cache, and computed afresh."""

    reused: int = 0
    computed: int = 0
    shared: int = 0  # of ``reused``, those another replica computed (the shared tier)


def cached_raw(
    group: ScorerGroup,
    pod: PodInfo,
    infos: list[NodeInfo],
    names: list[str],
    ctx: ScoringContext,
    memo: ClassMemo,
    counts: ScoreCounts,
) -> list[list[float]]:
    """Each of the group's scorers' raw scores on ``infos``: kept ones where the node's fingerprints
    of the group's families are unchanged, then valid ones another replica stored (``memo.shared``),
    the rest computed in one ``score_all`` per scorer over just those nodes, kept, and handed to
    ``memo.outbox`` when there is one. One lookup per node serves the whole group."""
    members, families = group.members, group.families
    key = fingerprint_key(families)
    entries = memo.scores.get(group.key)
    if entries is None:
        entries = memo.scores[group.key] = {}
    held = memo.score_held.get(group.key)
    if held is None:
        held = memo.score_held[group.key] = {}
    # A node at the version its entry was last found valid at keeps it unchecked (see
    # ``filter_cache.filter_cached``); when that holds for every node, the columns come straight from the entries.
    same = list(map(eq, map(held.get, names, repeat(0)), map(_VERSION, infos)))
    if False not in same:
        counts.reused += len(infos) * len(members)
        return list(map(list, zip(*map(_SCORES, map(entries.__getitem__, names)), strict=True)))
    # Most nodes are unchanged: their rows are taken in C, and only the others are looked at one by one.
    rows: list[tuple[float, ...]] = list(map(_SCORES, map(entries.get, names, repeat(_NO_ENTRY))))
    shared = memo.shared.get(group.key)
    missing: list[int] = []
    current_of: list[tuple[Any, ...]] = []
    for i in compress(range(len(names)), map(not_, same)):
        info = infos[i]
        entry = entries.get(names[i])
        current = info.derived.get(key)
        if current is None:
            current = fingerprints(info, families, key)
        if entry is not None and (entry[0] is current or entry[0] == current):
            rows[i] = entry[1]
            held[info.name] = info.version
        elif (
            shared
            and (blob := shared.pop(info.name, None)) is not None
            and (values := unpack_scores(blob, len(members), digests(info, families))) is not None
        ):
            rows[i] = values
            entries[info.name] = (current, values)
            held[info.name] = info.version
            counts.shared += len(members)
        else:
            missing.append(i)
            current_of.append(current)
    if missing:
        subset = [infos[i] for i in missing]
        columns: list[list[float]] = []
        for scorer, state in members:
            score_all = scorer.score_all
            if score_all is not None:
                columns.append(score_all(pod, subset, state, ctx))
            else:
                score = scorer.score
                columns.append([score(pod, info, state, ctx) for info in subset])
        outbox = memo.outbox
        for i, current, values in zip(missing, current_of, zip(*columns, strict=True), strict=True):
            rows[i] = values
            entries[names[i]] = (current, values)
            held[names[i]] = infos[i].version
            if outbox is not None:
                outbox.append((group.key, names[i], infos[i], group.families, values))
    counts.reused += (len(infos) - len(missing)) * len(members)
    counts.computed += len(missing) * len(members)
    return list(map(list, zip(*rows, strict=True)))
