"""Counts summed over every node's contribution, patched for the nodes that change instead of recounted."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from extenders.model import NodeInfo

# One node's part of a tally: (group, key, owner) items, each counting one under its group and key.
Contribution = tuple[tuple[Hashable, Hashable, str], ...]
NodeContribution = Callable[[NodeInfo], Contribution]


class Tally:
    """Counts per group and key over the nodes' contributions, and how many items each owner gave.

    A contribution is a tuple of ``(group, key, owner)`` items, each counting one under
    ``counts[group][key]``. ``counts`` (and each group's dict) and ``owners`` are read-only to
    callers: snapshots the tally was handed down to unchanged share them.
    """

    __slots__ = ("contribute", "counts", "owners", "parts")

    def __init__(self, contribute: NodeContribution) -> None:
        self.contribute = contribute
        self.counts: dict[Hashable, dict[Hashable, int]] = {}
        self.owners: dict[str, int] = {}
        self.parts: dict[str, Contribution] = {}  # node name -> its (non-empty) contribution

    def add(self, name: str, part: Contribution, sign: int = 1, fresh: set[Hashable] | None = None) -> None:
        """Count ``part`` in (sign 1) or out (-1); ``fresh``: groups whose dicts this tally owns, others
        are copied before their first change."""
        if not part:
            return
        counts, owners = self.counts, self.owners
        for group, key, owner in part:
            keys = counts.get(group)
            if keys is None:
                keys = counts[group] = {}
                if fresh is not None:
                    fresh.add(group)
            elif fresh is not None and group not in fresh:
                keys = counts[group] = dict(keys)
                fresh.add(group)
            left = keys.get(key, 0) + sign
            if left:
                keys[key] = left
            else:
                del keys[key]
                if not keys:
                    del counts[group]
            held = owners.get(owner, 0) + sign
            if held:
                owners[owner] = held
            else:
                del owners[owner]
        if sign > 0:
            self.parts[name] = part
        else:
            self.parts.pop(name, None)

    def patched(self, changed: Iterable[NodeInfo]) -> Tally:
        """This tally with the parts of the ``changed`` nodes replaced (itself when none differs)."""
        out: Tally | None = None
        fresh: set[Hashable] = set()
        for new in changed:
            part = self.contribute(new)
            old = self.parts.get(new.name, ())
            if part == old:
                continue
            if out is None:
                out = Tally(self.contribute)
                out.counts, out.owners, out.parts = dict(self.counts), dict(self.owners), dict(self.parts)
            out.add(new.name, old, -1, fresh)
            out.add(new.name, part, 1, fresh)
        return self if out is None else out
