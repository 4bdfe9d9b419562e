"""A pod's resource requests with kube-scheduler's arithmetic (component-helpers' PodRequests).

The containers' aggregate is the larger of (regular containers + restartable init containers,
i.e. sidecars) and the peak of the init phase: init containers run one by one, but every sidecar
started before one keeps running. A pod being resized in place counts, per resource, the larger
of that aggregate over its spec and over what its status says was allocated and is actuated.
Pod-level requests (``spec.resources``), when set, replace the aggregate for cpu, memory and
hugepages. The pod overhead is added last.

NodeResourcesFit's scorer (LeastAllocated, MostAllocated) counts the pod being scheduled another
way: every container's spec with the scoring defaults filled in, ignoring pod-level requests and the
status (see ``PodResources.score_nonzero``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from extenders.quantity import parse_quantity, resource_amount

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"
# kube-scheduler's scoring defaults for containers that request nothing (never used for fit).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
# The pod condition a kubelet sets while a resize waits, and its reason when it never can be done.
RESIZE_PENDING = "PodResizePending"
RESIZE_INFEASIBLE = "Infeasible"

Json = Mapping[str, Any]


def _amounts(resources: Mapping[str, Any] | None) -> dict[str, int]:
    return {name: resource_amount(name, qty) for name, qty in (resources or {}).items()}


def container_requests(container: Json) -> dict[str, int]:
    """Requests of one container; a limit with no request counts as the request (API defaulting)."""
    resources = container.get("resources") or {}
    out = _amounts(resources.get("limits"))
    out.update(_amounts(resources.get("requests")))
    return out


def container_limits(container: Json) -> dict[str, int]:
    """Limits of one container: pod-level limits a pod omits default from the containers' (hugepages)."""
    return _amounts((container.get("resources") or {}).get("limits"))


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _max_into(into: dict[str, int], more: Mapping[str, int]) -> None:
    """Per resource, the larger; a resource only ``more`` names is taken even at zero (kept as present)."""
    for name, amount in more.items():
        if name not in into or amount > into[name]:
            into[name] = amount


def _max_of(first: Mapping[str, int], *others: Mapping[str, int]) -> dict[str, int]:
    out = dict(first)
    for other in others:
        _max_into(out, other)
    return out


def _less(amounts: dict[str, int], minus: Mapping[str, int]) -> dict[str, int]:
    """``amounts`` less ``minus`` for the resources ``amounts`` names, never below zero."""
    return {name: max(0, amount - minus.get(name, 0)) for name, amount in amounts.items()}


def is_pod_level_resource(name: str) -> bool:
    """The resources pod-level requests and limits may name (cpu, memory, hugepages)."""
    return name in (CPU, MEMORY) or name.startswith(HUGEPAGES_PREFIX)


def resize_infeasible(status: Json) -> bool:
    """Whether the first PodResizePending condition says the resize can never be done."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == RESIZE_PENDING:
            return bool(condition.get("reason") == RESIZE_INFEASIBLE)
    return False


class _Container:
    """One container with its spec and status amounts parsed once, for the several views of it.

    ``allocated`` and ``actuated`` are None when the status does not say; ``echoes_spec`` is True
    when what it says is the spec (the common case: recent kubelets report both).
    """

    __slots__ = ("actuated", "allocated", "echoes_spec", "raw", "requests", "sidecar")

    def __init__(self, raw: Json, status: Json | None, sidecar: bool) -> None:
        self.raw = raw
        self.sidecar = sidecar
        resources = raw.get("resources") or {}
        spec_requests = resources.get("requests")
        limits = resources.get("limits")
        requests = container_requests(raw)
        self.requests = requests
        self.allocated: dict[str, int] | None = None
        self.actuated: dict[str, int] | None = None
        self.echoes_spec = True
        if status is None:
            return
        # A status that repeats the spec's requests verbatim is not parsed again (when no limit
        # stands in for a missing request, the spec's requests are exactly those).
        verbatim = spec_requests if not limits or limits.keys() <= (spec_requests or {}).keys() else None
        allocated = status.get("allocatedResources")
        if allocated is not None:
            self.allocated = requests if allocated == verbatim else _amounts(allocated)
        actuated = (status.get("resources") or {}).get("requests")
        if actuated is not None:
            if actuated == verbatim:
                self.actuated = requests
            elif actuated == allocated:
                self.actuated = self.allocated
            else:
                self.actuated = _amounts(actuated)
        self.echoes_spec = (self.allocated is None or self.allocated == requests) and (
            self.actuated is None or self.actuated == requests
        )


# One container's resources as one view sees it (spec, limits, allocated, actuated), given whether
# the pod's resize is infeasible: amounts, or None for nothing.
ContainerView = Callable[[_Container, bool], Mapping[str, int] | None]


def _spec_view(container: _Container, _infeasible: bool) -> Mapping[str, int]:
    """What the spec asks for, whatever the kubelet says."""
    return container.requests


def _limits_view(container: _Container, _infeasible: bool) -> Mapping[str, int]:
    """The spec's limits, for the pod-level limits a pod leaves to default from them."""
    return container_limits(container.raw)


def _allocated_view(container: _Container, infeasible: bool) -> Mapping[str, int] | None:
    """What the kubelet admitted the container with; the spec until it says (nothing if infeasible)."""
    if container.allocated is not None:
        return container.allocated
    return None if infeasible else container.requests


def _actuated_view(container: _Container, infeasible: bool) -> Mapping[str, int] | None:
    """What the runtime runs the container with, else what was allocated, else the spec."""
    if container.actuated is not None:
        return container.actuated
    if container.allocated is not None:
        return container.allocated
    return None if infeasible else container.requests


class _Pod:
    """A pod's spec and status read once for the several aggregates one answer needs."""

    __slots__ = ("containers", "echoes_spec", "infeasible", "init_containers", "overhead", "spec", "status")

    def __init__(self, spec: Json, status: Json) -> None:
        statuses: dict[str, Json] = {}
        # A regular container's status wins over an init container's of the same name.
        for key in ("containerStatuses", "initContainerStatuses"):
            for entry in status.get(key) or []:
                statuses.setdefault(entry.get("name") or "", entry)
        self.spec = spec
        self.status = status
        self.infeasible = resize_infeasible(status)
        self.overhead = _amounts(spec.get("overhead"))
        self.containers = [
            _Container(c, statuses.get(c.get("name") or ""), False) for c in spec.get("containers") or []
        ]
        self.init_containers = [
            _Container(c, statuses.get(c.get("name") or ""), c.get("restartPolicy") == "Always")
            for c in spec.get("initContainers") or []
        ]
        # Nothing allocated or actuated differs from the spec (or no status says anything).
        self.echoes_spec = all(c.echoes_spec for c in self.containers) and all(
            c.echoes_spec for c in self.init_containers
        )

    def aggregate(self, view: ContainerView, defaults: Mapping[str, int] | None = None) -> dict[str, int]:
        """The containers' aggregate under one view; ``defaults`` fill the resources a container omits."""
        infeasible = self.infeasible

        def of(container: _Container) -> Mapping[str, int]:
            amounts = view(container, infeasible) or {}
            return {**defaults, **amounts} if defaults else amounts

        total: dict[str, int] = {}
        for container in self.containers:
            _add(total, of(container))
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for container in self.init_containers:
            amounts = of(container)
            if container.sidecar:
                _add(total, amounts)
                _add(sidecars, amounts)
                # A sidecar is running while later init containers run, so it raises their peak too.
                _max_into(init_peak, sidecars)
            else:
                step = dict(sidecars)
                _add(step, amounts)
                _max_into(init_peak, step)
        _max_into(total, init_peak)
        return total

    def pod_status_totals(self) -> tuple[Json, Json] | None:
        """The status's pod-wide (allocated, actuated) requests, when it carries both, else None."""
        allocated = self.status.get("allocatedResources")
        actuated = (self.status.get("resources") or {}).get("requests")
        return None if allocated is None or actuated is None else (allocated, actuated)

    def status_is_spec(self) -> bool:
        """Whether the containers' aggregate is their spec's: no status says otherwise."""
        return self.echoes_spec and not self.infeasible and self.pod_status_totals() is None

    def containers_requests(self, defaults: Mapping[str, int] | None) -> dict[str, int]:
        """The containers' aggregate with in-place resizes: the larger of spec, allocated and actuated.

        When the pod's status carries pod-wide allocated and actuated totals, those stand for the
        containers' statuses. A resize found infeasible no longer counts the spec it asked for.
        """
        desired = self.aggregate(_spec_view, defaults)
        totals = self.pod_status_totals()
        if totals is not None:
            allocated, actuated = _amounts(totals[0]), _amounts(totals[1])
        elif self.echoes_spec and not self.infeasible:
            return desired  # allocated and actuated are the spec: all three views agree
        else:
            allocated = self.aggregate(_allocated_view, defaults)
            actuated = self.aggregate(_actuated_view, defaults)
        return _max_of(actuated, allocated) if self.infeasible else _max_of(desired, actuated, allocated)

    def pod_level_requests(self) -> dict[str, int] | None:
        """``spec.resources.requests`` as the API server stores it, or None when it names no pod-level resource.

        The API server defaults them (when the pod sets pod-level limits) from the containers'
        requests for cpu and memory, then from the pod-level limits; hugepages limits themselves
        default to the containers' total. Applied here too, so a spec not yet defaulted counts alike.
        """
        resources = self.spec.get("resources")
        if resources is None:
            return None
        requests = _amounts(resources.get("requests"))
        limits = _amounts(resources.get("limits"))
        if requests or limits:
            for name, amount in self.aggregate(_limits_view).items():
                if name.startswith(HUGEPAGES_PREFIX) and name not in requests and name not in limits:
                    limits[name] = amount
        if limits:
            for name, amount in self.aggregate(_spec_view).items():
                if name in (CPU, MEMORY) and name not in requests:
                    requests[name] = amount
            for name, amount in limits.items():
                if is_pod_level_resource(name) and name not in requests:
                    requests[name] = amount
        return requests if any(map(is_pod_level_resource, requests)) else None

    def requests(self, pod_level: dict[str, int] | None, defaults: Mapping[str, int] | None = None) -> dict[str, int]:
        """PodRequests: every resource named anywhere is present, zero or not (callers test presence)."""
        total = self.containers_requests(defaults)
        if pod_level is not None:
            effective = pod_level
            pod_actuated = self.status.get("resources")
            pod_allocated = self.status.get("allocatedResources")
            if pod_actuated is not None or pod_allocated is not None:
                # Pod-wide status totals include the overhead, which is added back below.
                actuated = _less(_amounts((pod_actuated or {}).get("requests")), self.overhead)
                allocated = _less(_amounts(pod_allocated), self.overhead)
                effective = _max_of({} if self.infeasible else pod_level, actuated, allocated)
            for name, amount in effective.items():
                if is_pod_level_resource(name):
                    total[name] = amount
        _add(total, self.overhead)
        return total


class PodResources(NamedTuple):
    """A pod's requests as kube-scheduler counts them, in scheduler units (millicores for cpu)."""

    requests: dict[str, int]  # what fit counts, zero amounts dropped
    nonzero_cpu: int  # what the pod adds to its node's non-zero requested totals
    nonzero_memory: int
    # What NodeResourcesFit's scorer counts for the pod while it is the one being scheduled, when
    # that differs from the non-zero pair (with pod-level requests, or a status that differs from
    # the spec), else None. See ``fit_score_requests``.
    score_nonzero: tuple[int, int] | None


_DEFAULTS = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def fit_score_requests(pod: _Pod) -> dict[str, int]:
    """What NodeResourcesFit's scorer counts for the pod being scheduled (kube-scheduler 1.33 on).

    resourceAllocationScorer.calculatePodResourceRequest reads its own enablePodLevelResources and
    enableInPlacePodVerticalScaling, which NewFit never sets (it sets Fit's fields of those names,
    and only BalancedAllocation sets its scorer's): PodRequests then skips pod-level requests and
    the status. Every container that omits cpu or memory counts the default, and the overhead is
    added. (Before 1.33 the two gates were read directly; with their defaults, the same amounts.)
    """
    total = pod.aggregate(_spec_view, _DEFAULTS)
    _add(total, pod.overhead)
    return total


def pod_resources(spec: Json, status: Json | None = None) -> PodResources:
    """Requests and non-zero requests of a pod.

    A container that omits cpu or memory counts kube-scheduler's default for it in the non-zero
    totals (NodeInfo.NonZeroRequested, from PodInfo.CalculateResource). With pod-level requests
    set, a node's totals fill the default in only where nothing (containers, the pod level, the
    overhead) names that resource. The pod being scheduled, NodeResourcesFit's scorer counts with
    ``fit_score_requests``: its containers' spec alone, defaults filled in for every container.
    """
    pod = _Pod(spec, status or {})
    pod_level = pod.pod_level_requests()
    requests = pod.requests(pod_level)
    defaults = _DEFAULTS if pod_level is None else {k: v for k, v in _DEFAULTS.items() if k not in requests}
    nonzero = pod.requests(pod_level, defaults) if defaults else requests
    pair = (nonzero.get(CPU, 0), nonzero.get(MEMORY, 0))
    score_nonzero: tuple[int, int] | None = None
    if pod_level is not None or not pod.status_is_spec():
        scored = fit_score_requests(pod)
        score_pair = (scored.get(CPU, 0), scored.get(MEMORY, 0))
        score_nonzero = score_pair if score_pair != pair else None
    return PodResources({k: v for k, v in requests.items() if v}, pair[0], pair[1], score_nonzero)


def pod_requests(spec: Json, status: Json | None = None) -> dict[str, int]:
    """Effective requests of a pod, in scheduler units (millicores for cpu)."""
    pod = _Pod(spec, status or {})
    return {k: v for k, v in pod.requests(pod.pod_level_requests()).items() if v}


def is_best_effort(spec: Json) -> bool:
    """True when no container sets a non-zero cpu or memory request or limit (QoS class BestEffort).

    As in Kubernetes' QoS computation, an explicit zero counts as unset.
    """
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            values = resources.get(section) or {}
            if any(k in values and parse_quantity(values[k]) > 0 for k in (CPU, MEMORY)):
                return False
    return True
