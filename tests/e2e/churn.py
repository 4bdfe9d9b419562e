"""A seeded stream of gang churn through the real kube-scheduler, and the invariants checked on it.

Gangs of varied size, minimum, size of member, label scheme and priority are created; some are
cancelled at a random moment of their life, completed ones finish (their pods deleted), and more
important work preempts some (whole); plain pods of two priorities come and go between them; nodes
are drained, removed and added back under the same name. After every step the
cluster is read back from the API server and from the extender, and these must hold:

- no gang is ever partly bound (bound members are none, or at least its minimum) for longer than
  its Bindings take to land (``RELEASE_SECONDS``);
- no node ever holds more CPU than it has;
- a gang that fits in the free capacity, with no more important gang incomplete, every older gang
  of its priority complete, gone or unable to fit, and no other gang assembling, completes within
  ``COMPLETE_SECONDS``;
- no gang holds an assembling slot or a queue place without a live member for longer than
  ``VACANT_SECONDS`` (the sweep interval, 1 s, plus the watch's write and a sampling step);
- Redis remembers no gang whose pods have all been gone for longer than ``VACANT_SECONDS``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import redis

from devstack import http_client
from devstack.kube import Kube, resources
from tests.e2e.churn_model import (
    COMPLETE_SECONDS,
    GANG_LABEL,
    MEMBER_MILLICPU,
    NODE_MILLICPU,
    PLAIN_LABEL,
    POD_GROUP_MIN,
    PRIORITIES,
    RELEASE_SECONDS,
    SCHEMES,
    VACANT_SECONDS,
    Figures,
    Gang,
    Observation,
    fits,
    names_of,
)
from tests.e2e.churn_report import describe
from tests.e2e.scenarios import ScenarioCluster


class Churn:
    """Drives the stream on one namespace and checks the invariants after every step."""

    def __init__(
        self,
        cluster: ScenarioCluster,
        redis_client: redis.Redis,
        prefix: str,
        replica_urls: list[str],
        seed: int,
        *,
        nodes: int = 6,
        logs: Callable[[], str] = lambda: "",
    ) -> None:
        self.cluster = cluster
        self.kube: Kube = cluster.kube
        self.redis = redis_client
        self.prefix = prefix
        self.replica_urls = replica_urls
        self.rng = random.Random(seed)
        self.logs = logs
        self.node_count = nodes
        self.nodes: list[str] = []
        self.removed: list[str] = []
        self.gangs: dict[str, Gang] = {}
        self.plain: list[str] = []
        self.figures = Figures()
        self.violations: list[str] = []
        self.details: list[tuple[str, str]] = []  # per violation of a gang: (its name, its state then)
        self._docs: list[dict[str, Any]] = []  # the extender's gang documents of the latest check
        self.vacant_since: dict[str, float] = {}  # gang key -> first seen holding with no live member
        self.gone_since: dict[str, float] = {}  # gang key -> when the test saw its last pod gone
        self._serial = 0

    # --- the stream ----------------------------------------------------------------------------

    def start(self) -> None:
        self.nodes = self.cluster.nodes(self.node_count, cpu=str(NODE_MILLICPU // 1000))
        self.cluster.wait_synced()

    def step(self) -> None:
        """One random change of the cluster."""
        roll = self.rng.random()
        if roll < 0.40:
            self.create_gang()
        elif roll < 0.55:
            self.cancel_gang()
        elif roll < 0.72:
            self.finish_gang()
        elif roll < 0.87:
            self.plain_pods()
        elif roll < 0.94:
            self.drain_node()
        else:
            self.restore_node()

    def key(self, name: str) -> str:
        return f"{self.cluster.namespace}/{name}"

    def create_gang(self) -> None:
        self._serial += 1
        size = self.rng.randint(2, 5)
        scheme = self.rng.choice(SCHEMES)
        minimum = size - 1 if scheme in ("podgroup", "annotated") and self.rng.random() < 0.3 else size
        priority_class, priority = self.rng.choices(PRIORITIES, weights=(5, 3, 2))[0]
        gang = Gang(
            f"g{self._serial}", size, minimum, self.rng.choice(MEMBER_MILLICPU), scheme, priority_class, priority
        )
        if scheme == "podgroup":
            self.kube.create(
                f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{self.cluster.namespace}/podgroups",
                {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": gang.name},
                    "spec": {"minMember": minimum},
                },
            )
        annotations = {POD_GROUP_MIN: str(minimum)} if scheme == "annotated" else None
        gang.created = time.monotonic()
        self.gangs[gang.name] = gang
        self.gone_since.pop(self.key(gang.name), None)
        spec = {"priorityClassName": priority_class} if priority_class else {}
        for i in range(size):
            name = f"{gang.name}-{i}"
            self.cluster.pod(
                name, requests=resources(cpu=f"{gang.millicpu}m"), labels=gang.labels(), annotations=annotations, **spec
            )
            gang.names.append(name)
        self.figures.gangs += 1

    def delete_gang(self, gang: Gang) -> None:
        gang.cancelled = True
        self.kube.delete_pods(self.cluster.namespace, f"{GANG_LABEL}={gang.name}")
        if gang.scheme == "podgroup":
            self.kube.delete(
                f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{self.cluster.namespace}/podgroups/{gang.name}"
            )

    def cancel_gang(self) -> None:
        live = [g for g in self.gangs.values() if not g.cancelled and g.completed is None]
        if live:
            self.delete_gang(self.rng.choice(live))
            self.figures.cancelled += 1

    def finish_gang(self) -> None:
        done = [g for g in self.gangs.values() if not g.cancelled and g.completed is not None]
        if done:
            self.delete_gang(self.rng.choice(done))
            self.figures.finished += 1

    def plain_pods(self) -> None:
        if self.plain and self.rng.random() < 0.4:
            name = self.plain.pop(self.rng.randrange(len(self.plain)))
            self.kube.delete_pod(self.cluster.namespace, name)
            return
        self._serial += 1
        name = f"p{self._serial}"
        spec = {"priorityClassName": "e2e-low"} if self.rng.random() < 0.5 else {}
        self.cluster.pod(name, requests=resources(cpu="500m"), labels={PLAIN_LABEL: "yes"}, **spec)
        self.plain.append(name)
        self.figures.plain += 1

    def drain_node(self) -> None:
        """Evict what runs on a node (whole gangs, as a job loses its run when one of its pods goes),
        then delete the node; it comes back later under the same name."""
        if len(self.nodes) <= 3:
            return
        node = self.rng.choice(self.nodes)
        self.evict(node)
        self.kube.delete_node(node)
        self.nodes.remove(node)
        self.removed.append(node)
        self.figures.drained += 1

    def evict(self, node: str) -> None:
        for pod in self.kube.pods(self.cluster.namespace):
            if pod["spec"].get("nodeName") != node:
                continue
            labels = pod["metadata"].get("labels") or {}
            gang = self.gangs.get(labels.get(GANG_LABEL, ""))
            if gang is not None:
                if not gang.cancelled:
                    self.delete_gang(gang)
            else:
                self.kube.delete_pod(self.cluster.namespace, pod["metadata"]["name"])
                if pod["metadata"]["name"] in self.plain:
                    self.plain.remove(pod["metadata"]["name"])

    def restore_node(self) -> None:
        if not self.removed:
            return
        node = self.removed.pop(0)
        self.kube.create_node(node, cpu=str(NODE_MILLICPU // 1000))
        self.nodes.append(node)
        self.figures.restored += 1

    # --- the invariants ------------------------------------------------------------------------

    def observe(self) -> Observation:
        pods = {p["metadata"]["name"]: p for p in self.kube.pods(self.cluster.namespace)}
        present = {n["metadata"]["name"] for n in self.kube.nodes()}
        nodes = {n: NODE_MILLICPU for n in self.nodes if n in present}
        return Observation(pods, nodes, time.monotonic())

    def violate(self, text: str, gang: Gang | None = None, obs: Observation | None = None) -> None:
        self.violations.append(f"{time.strftime('%H:%M:%S')} {text}")
        if gang is not None and obs is not None:
            doc = next((d for d in self._docs if d["name"] == gang.name), None)
            self.details.append((gang.name, describe(gang.name, gang.names, obs.pods, obs.free(), doc)))

    def check(self) -> None:
        obs = self.observe()
        docs = self._docs = self.gang_documents(self.replica_urls[0])
        self.figures.checks += 1
        self.collect_stranded(obs)
        assembling = {d["name"] for d in docs if d["state"] == "assembling" and d["members"] > 0}
        self.check_gangs(obs, assembling)
        self.check_capacity(obs)
        self.check_vacant(obs, docs)
        self.check_redis(obs)

    def collect_stranded(self, obs: Observation) -> None:
        """Pods bound to a node that no longer exists (a bind that raced the drain): the pod garbage
        collector would delete them; so does the test, and their gang with them."""
        for name, pod in obs.pods.items():
            node = pod["spec"].get("nodeName")
            if node and node in self.removed:
                gang = self.gangs.get((pod["metadata"].get("labels") or {}).get(GANG_LABEL, ""))
                if gang is not None and not gang.cancelled:
                    self.delete_gang(gang)
                elif gang is None:
                    self.kube.delete_pod(self.cluster.namespace, name)

    def check_gangs(self, obs: Observation, assembling: set[str]) -> None:
        """``assembling``: gangs the extender lets assemble now (their reservations are not in the
        API server's view of the free capacity, so every other gang waits for them)."""
        free = obs.free()
        self.plain = [n for n in self.plain if n in obs.pods]  # preempted ones are gone
        fitting: set[int] = set()  # priorities with an incomplete gang that fits: it goes first
        waiting = -1  # the highest priority of an incomplete gang (it may be preempting)
        for gang in sorted(self.gangs.values(), key=lambda g: (-g.priority, g.created)):
            present = [n for n in gang.names if n in obs.pods]
            if not gang.cancelled and not present:
                gang.cancelled = True  # preempted: nobody but a preemption deletes its pods
                self.figures.preempted += 1
            if gang.cancelled:
                if not present:
                    del self.gangs[gang.name]
                    self.gone_since.setdefault(self.key(gang.name), obs.at)
                continue
            bound = obs.bound(gang.names)
            if 0 < bound < gang.minimum:
                since = gang.partial_since = gang.partial_since or obs.at
                if obs.at - since > RELEASE_SECONDS:
                    self.violate(f"gang {gang.name} partly bound: {bound} of its minimum {gang.minimum}", gang, obs)
                    gang.partial_since = obs.at  # reported once per period
            else:
                gang.partial_since = None
            if bound >= gang.minimum:
                if gang.completed is None:
                    gang.completed = obs.at
                    self.figures.completed += 1
                    if gang.eligible_since is not None:
                        wait = obs.at - gang.eligible_since
                        self.figures.waits.append(wait)
                        if wait > self.figures.slowest[1]:
                            self.figures.slowest = (
                                f"{gang.name} ({gang.scheme}, {gang.size} x {gang.millicpu}m)",
                                wait,
                            )
                gang.eligible_since = None  # a wait ends when the gang completes
                continue
            can = fits(gang, gang.minimum - bound, free)
            blocked = waiting > gang.priority or gang.priority in fitting
            if can and not blocked and not assembling - {gang.name}:
                if gang.eligible_since is None:
                    gang.eligible_since = obs.at
                elif obs.at - gang.eligible_since > COMPLETE_SECONDS:
                    self.violate(
                        f"gang {gang.name} ({gang.size} x {gang.millicpu}m, minimum {gang.minimum}) fits and "
                        f"waits behind nothing, yet is not complete after {obs.at - gang.eligible_since:.0f}s",
                        gang,
                        obs,
                    )
                    gang.eligible_since = obs.at  # reported once per period
            else:
                gang.eligible_since = None
            waiting = max(waiting, gang.priority)
            if can:
                fitting.add(gang.priority)

    def check_capacity(self, obs: Observation) -> None:
        for node, left in obs.free().items():
            if left < 0:
                self.violate(f"node {node} over capacity by {-left}m")

    def gang_documents(self, url: str) -> list[dict[str, Any]]:
        resp = http_client.get(f"{url}/v1/gangs", timeout=5)
        resp.raise_for_status()
        docs: list[dict[str, Any]] = resp.json()
        return [d for d in docs if d["namespace"] == self.cluster.namespace]

    def check_vacant(self, obs: Observation, docs: list[dict[str, Any]]) -> None:
        holding = set()
        for doc in docs:
            if (doc["admitted"] or doc["queuePosition"]) and doc["members"] == 0:
                holding.add(self.key(doc["name"]))
        for key in list(self.vacant_since):
            if key not in holding:
                del self.vacant_since[key]
        for key in holding:
            since = self.vacant_since.setdefault(key, obs.at)
            if obs.at - since > VACANT_SECONDS:
                self.violate(f"gang {key} holds a slot or queue place with no live member for {obs.at - since:.1f}s")
                self.vacant_since[key] = obs.at

    def redis_gangs(self) -> set[str]:
        return {g for g in names_of(self.redis.zrange(f"{self.prefix}:gangs", 0, -1)) if g.startswith(self.ns_prefix)}

    @property
    def ns_prefix(self) -> str:
        return f"{self.cluster.namespace}/"

    def check_redis(self, obs: Observation) -> None:
        for key in self.redis_gangs():
            since = self.gone_since.get(key)
            if since is not None and obs.at - since > VACANT_SECONDS:
                self.violate(f"Redis still holds gang {key}, gone for {obs.at - since:.1f}s")
                self.gone_since[key] = obs.at

    def leftovers(self) -> list[str]:
        """What Redis still holds of this namespace's gangs: keys, and entries of the shared sets."""
        out = names_of(self.redis.scan_iter(f"{self.prefix}:gang*:{self.ns_prefix}*"))
        for name in ("gangs", "gangq", "gangasm", "gangnudge"):
            out += [
                f"{name}[{g}]"
                for g in names_of(self.redis.zrange(f"{self.prefix}:{name}", 0, -1))
                if g.startswith(self.ns_prefix)
            ]
        out += [
            f"gangactive[{g}]"
            for g in names_of(self.redis.smembers(f"{self.prefix}:gangactive"))
            if g.startswith(self.ns_prefix)
        ]
        return out

    def run(self, seconds: float, step_every: float = 0.7) -> None:
        began = time.monotonic()
        next_step = began
        while time.monotonic() - began < seconds:
            if time.monotonic() >= next_step:
                self.step()
                next_step += step_every * (0.5 + self.rng.random())
            self.check()
            time.sleep(0.2)
