"""Gang knobs in one dataclass, so the HTTP layer maps ``EXTENDER_GANG_*`` settings onto it 1:1."""

from __future__ import annotations

from dataclasses import dataclass, field

from extenders.binding.binder import VICTIM_WAIT_SECONDS

# (name key, minimum key); each key is looked up in the pod's labels, then its annotations.
LabelPair = tuple[str, str]

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
# scheduler-plugins keeps the quorum on the PodGroup object; without the CRD (or before the
# PodGroup is seen) this annotation on the pods gives it instead.
POD_GROUP_MIN_ANNOTATION = "scheduling.x-k8s.io/min-available"
LEGACY_NAME_LABEL = "pod-group.scheduling.sigs.k8s.io/name"
LEGACY_MIN_LABEL = "pod-group.scheduling.sigs.k8s.io/min-available"
UNICORE_NAME_LABEL = "gang.unicore.mcyou.cn/name"
UNICORE_COUNT_LABEL = "gang.unicore.mcyou.cn/available-count"

DEFAULT_LABELS: tuple[LabelPair, ...] = (
    (POD_GROUP_LABEL, POD_GROUP_MIN_ANNOTATION),
    (LEGACY_NAME_LABEL, LEGACY_MIN_LABEL),
    (UNICORE_NAME_LABEL, UNICORE_COUNT_LABEL),
)


def parse_label_pairs(text: str) -> tuple[LabelPair, ...]:
    """``"name-key=min-key,name2=min2"`` as pairs (the form of ``EXTENDER_GANG_LABELS``)."""
    pairs: list[LabelPair] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, minimum = item.partition("=")
        if not sep or not name.strip() or not minimum.strip():
            raise ValueError(f"gang label pair {item!r} is not of the form name-key=min-key")
        pairs.append((name.strip(), minimum.strip()))
    if not pairs:
        raise ValueError("no gang label pairs given")
    return tuple(pairs)


@dataclass(frozen=True, slots=True)
class GangConfig:
    """Timing and membership settings of gang scheduling (all durations in seconds)."""

    window_seconds: float = 30.0  # from a gang's first arrival at bind to giving up on it
    cooldown_seconds: float = 10.0  # after a rejection, members fail filter this long
    cooldown_max_seconds: float = 300.0  # each rejection in a row doubles the cool-down, up to this
    max_assembling: int = 1  # gangs admitted to assemble at once (the no-deadlock bound)
    arrival_lease_seconds: float = 5.0  # a held call refreshes its arrival; a dead replica's lapses
    idle_seconds: float = 600.0  # gang bookkeeping untouched this long is deleted
    queue_idle_seconds: float = 60.0  # a queued / admitted gang with no activity this long loses its place
    poll_interval_seconds: float = 0.5  # held calls re-read their gang this often (pub/sub wakes sooner)
    sweep_interval_seconds: float = 1.0  # each replica drops lapsed arrivals and closes windows this often
    assumed_ttl_seconds: float = 60.0  # a permitted or bound member's reservation (until bound and confirmed)
    cas_retries: int = 8  # re-validations when a node changed between fit check and reservation
    api_bind_concurrency: int = 8  # Binding requests one replica has in flight at once
    victim_wait_seconds: float = VICTIM_WAIT_SECONDS  # a preemptor's bind waits this long for its victims to go
    use_podgroup_timeout: bool = True  # a PodGroup's scheduleTimeoutSeconds overrides the window
    labels: tuple[LabelPair, ...] = field(default=DEFAULT_LABELS)
    # The name key whose gangs may have a PodGroup object (its minMember wins over the annotation).
    podgroup_label: str = POD_GROUP_LABEL

    def __post_init__(self) -> None:
        if self.window_seconds <= 0 or self.cooldown_seconds < 0 or self.arrival_lease_seconds <= 0:
            raise ValueError("gang window and lease must be positive, cool-down not negative")
        if self.max_assembling < 1:
            raise ValueError("max_assembling must be at least 1")
        if self.poll_interval_seconds <= 0 or self.poll_interval_seconds >= self.arrival_lease_seconds:
            raise ValueError("poll_interval_seconds must be positive and shorter than the arrival lease")

    @property
    def hold_ttl_seconds(self) -> float:
        """TTL of a held member's reservation; refreshed with its lease, so it lapses soon after a crash."""
        return 3 * self.arrival_lease_seconds
