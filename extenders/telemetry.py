"""Prometheus metrics of the engine: gangs, snapshot, watch, leadership, Redis and Events.

One ``Telemetry`` per replica, registered on the registry the web layer serves. Components take
it as an argument; one made with no registry records into a private one (tests, tools).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Redis calls are sub-millisecond when healthy; the tail shows a saturated server or network.
_REDIS_BUCKETS = (0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 3.0)
# Catch-ups and watch lag: milliseconds when healthy, seconds under a relist or a full load.
_FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Gang phases last seconds to minutes (window 30 s by default, cool-downs up to 5 min).
_GANG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Telemetry:
    """The engine's metric families (names follow Prometheus conventions: base units, ``_total``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry if registry is not None else CollectorRegistry()
        self.gangs = Gauge("extender_gangs", "Gangs known to the shared bookkeeping, by state.", ["state"], registry=r)
        self.gang_admissions = Counter(
            "extender_gang_admissions_total", "Gangs admitted to assemble (seen by the watch leader).", registry=r
        )
        self.gang_decisions = Counter(
            "extender_gang_decisions_total",
            "Gangs permitted, rejected, released (too few live members) or vanished (none left), seen by the "
            "watch leader.",
            ["outcome"],
            registry=r,
        )
        self.gang_preemptions = Counter(
            "extender_gang_preemptions_total",
            "Gangs preempted whole: kube-scheduler evicted members on one node, the watch leader the rest.",
            registry=r,
        )
        self.requeues = Counter(
            "extender_requeues_total",
            "Pods the extender moved back to kube-scheduler's active queue (an annotation touched), by reason: "
            "refused on a snapshot behind a change already written (stale_refusal), refused just before the "
            "watch wrote such a change (refused_before_change), parked after an attempt that failed on an "
            "error (errored), a gang member whose gang may go on (gang).",
            ["reason"],
            registry=r,
        )
        self.gates_removed = Counter(
            "extender_gang_gates_removed_total",
            "Pods the watch leader let through the gang assembly gate (its scheduling gate removed): a member "
            "whose gang is whole (member), a pod of no gang (no_gang), or a member whose gang's minimum is "
            "still unknown long after it was created (unknown_minimum).",
            ["why"],
            registry=r,
        )
        self.preemptor_retries = Counter(
            "extender_preemptor_retries_total",
            "A preemptor's retry meeting its own victims still in the snapshot: filter passed a node for it "
            "(passed), its bind waited and bound (bound) or waited in vain (refused); or kube-scheduler "
            "repeating a preemption already made, declined (repeat_declined); or victims an earlier "
            "preemption already deleted, proposed where the pod fits without them, declined (already_freed).",
            ["outcome"],
            registry=r,
        )
        self.gang_window = Histogram(
            "extender_gang_window_seconds",
            "From a gang's first held bind call to its decision, by outcome.",
            ["outcome"],
            buckets=_GANG_BUCKETS,
            registry=r,
        )
        self.gang_time_to_permit = Histogram(
            "extender_gang_time_to_permit_seconds",
            "From a gang's admission to assemble to its permit.",
            buckets=_GANG_BUCKETS,
            registry=r,
        )
        self.held_binds = Gauge(
            "extender_gang_held_binds", "Bind calls of gang members this replica holds.", registry=r
        )
        self.snapshot_generation = Gauge(
            "extender_snapshot_generation", "Cluster generation of this replica's snapshot.", registry=r
        )
        self.cluster_generation = Gauge(
            "extender_cluster_generation", "Cluster generation in Redis, read when scraped.", registry=r
        )
        self.snapshot_refresh = Histogram(
            "extender_snapshot_refresh_seconds",
            "Time to bring this replica's snapshot up to date, by kind (incremental catch-up or full load).",
            ["kind"],
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.cycle_snapshots = Counter(
            "extender_prioritize_cycle_snapshots_total",
            "Prioritize calls answered on the snapshot their pod's filter read here in the same cycle (no catch-up).",
            registry=r,
        )
        self.filter_snapshots = Counter(
            "extender_filter_snapshots_total",
            "Filters answered on this replica's last read of the snapshot, recent enough (held); decided on "
            "it, refused everywhere, and so decided again on a read made after the call arrived (held_refused); "
            "read after the call arrived (read).",
            ["source"],
            registry=r,
        )
        self.bind_snapshots = Counter(
            "extender_bind_snapshots_total",
            "Binds of pods outside gangs whose fit was checked on this replica's last read of the snapshot, "
            "recent enough (held), or on a read made after the call arrived (read).",
            ["source"],
            registry=r,
        )
        self.prioritize_ahead = Counter(
            "extender_prioritize_ahead_total",
            "Scores computed right after a filter answered, for its pod's prioritize call (computed), and "
            "prioritize calls answered with them (used).",
            ["outcome"],
            registry=r,
        )
        self.watch_lag = Histogram(
            "extender_watch_lag_seconds",
            "From receiving a watch event to its batch being written to Redis (watch leader), by resource.",
            ["resource"],
            buckets=_FAST_BUCKETS,
            registry=r,
        )
        self.watch_events = Counter(
            "extender_watch_events_total",
            "Watch events applied by the watch leader, by resource.",
            ["resource"],
            registry=r,
        )
        self.leader = Gauge("extender_leader", "1 while this replica holds the watch lease.", registry=r)
        self.leader_transitions = Counter(
            "extender_leader_transitions_total",
            "Watch leases won and lost by this replica.",
            ["event"],
            registry=r,
        )
        self.redis_latency = Histogram(
            "extender_redis_command_duration_seconds",
            "Redis round trips, by command (a Lua script by its name).",
            ["command"],
            buckets=_REDIS_BUCKETS,
            registry=r,
        )
        self.redis_errors = Counter(
            "extender_redis_errors_total", "Redis round trips that failed, by command.", ["command"], registry=r
        )
        self.kube_events = Counter(
            "extender_kube_events_total",
            "Kubernetes Events: created, updated (a repeat counted), dropped (rate limit or queue full), failed.",
            ["result"],
            registry=r,
        )
        self.podgroup_status_updates = Counter(
            "extender_podgroup_status_updates_total",
            "PodGroup status writes by the watch leader, by result.",
            ["result"],
            registry=r,
        )
        for outcome in ("permitted", "rejected", "released", "vanished"):
            self.gang_decisions.labels(outcome)
        for event in ("acquired", "lost"):
            self.leader_transitions.labels(event)
        for result in ("created", "updated", "dropped", "failed"):
            self.kube_events.labels(result)
