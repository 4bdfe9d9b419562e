"""What filtering answers: nodes that pass, nodes that fail, and the verdicts that say why."""

from __future__ import annotations

from dataclasses import dataclass, field

from extenders.plugins.framework import Verdict

NODE_NOT_FOUND = "node(s) not found in the extender's snapshot"
NOT_FOUND = Verdict(False, NODE_NOT_FOUND, unresolvable=True)
REASON_SEPARATOR = ", "


@dataclass(slots=True)
class FilterResult:
    passing: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    reused: int = 0  # nodes whose node-local verdict came from the equivalence cache
    computed: int = 0  # nodes evaluated afresh while the cache was in use
    shared: int = 0  # of ``reused``, verdicts another replica computed (the shared tier)
    recalled: bool = False  # every verdict held for the class on this snapshot (extenders.engine.answers)

    def fail(self, name: str, verdict: Verdict) -> None:
        """Note a failing node: in ``unresolvable`` when preemption cannot help, else in ``failed``."""
        (self.unresolvable if verdict.unresolvable else self.failed)[name] = verdict.reason


def combine(verdicts: list[Verdict]) -> Verdict:
    """Several failures as one: distinct reasons joined, unresolvable if any is."""
    reasons: list[str] = []
    for verdict in verdicts:
        for part in verdict.reason.split(REASON_SEPARATOR):
            if part not in reasons:
                reasons.append(part)
    return Verdict(False, REASON_SEPARATOR.join(reasons), any(v.unresolvable for v in verdicts))
