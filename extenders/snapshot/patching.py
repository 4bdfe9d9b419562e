"""How a summary's aggregates follow a new node table: each re-read on the changed nodes only."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from extenders.model import LabelKey, NodeFacts, NodeInfo

NodeValue = Callable[[NodeInfo], Any]
# A changed node: its new NodeInfo, and its facts before and after.
Changed = tuple[NodeInfo, NodeFacts | None, NodeFacts | None]


def patch_sizes(sizes: dict[str, tuple[str, int]], pairs: Iterable[Changed]) -> dict[str, tuple[str, int]]:
    """``sizes`` (a copy) as of the changed nodes' new facts: only a node at or before an image's
    first holder by name can change the size kept, so only such a node's facts are read, and an
    image whose first holder dropped it is left out (recomputed lazily)."""
    for new, old_facts, new_facts in pairs:
        if new_facts is old_facts:  # only its pods changed
            continue
        name = new.name
        before = old_facts.images if old_facts is not None else {}
        after = new_facts.images if new_facts is not None else {}
        for image in before.keys() | after.keys():
            entry = sizes.get(image)
            if entry is None:
                continue
            first = entry[0]
            listed = after.get(image)
            if name == first:
                if listed is None:
                    del sizes[image]
                else:
                    sizes[image] = (name, listed)
            elif listed is not None and (not first or name < first):
                sizes[image] = (name, listed)
    return sizes


def label_test(key: LabelKey) -> Callable[[NodeInfo], bool]:
    return lambda info: key in info.pods_by_label


def patch_names(
    names: frozenset[str],
    pairs: Iterable[Changed],
    test: Callable[[NodeInfo], bool],
) -> frozenset[str]:
    """``names`` with each changed node's membership re-tested (a copy only if one changes)."""
    out: set[str] | None = None
    for new, _old_facts, _new_facts in pairs:
        member = new.name in names
        if test(new) != member:
            if out is None:
                out = set(names)
            if member:
                out.discard(new.name)
            else:
                out.add(new.name)
    return names if out is None else frozenset(out)


def patch_column(
    values: dict[str, Any],
    pairs: Iterable[Changed],
    extract: NodeValue,
) -> dict[str, Any]:
    """``values`` with each changed node's entry re-extracted (a copy only if one changes)."""
    out: dict[str, Any] | None = None
    for new, _old_facts, _new_facts in pairs:
        value = extract(new)
        old = values.get(new.name)
        if value == old and (value is None) == (old is None):
            continue
        if out is None:
            out = dict(values)
        if value is None:
            out.pop(new.name, None)
        else:
            out[new.name] = value
    return values if out is None else out
