"""Our filter and scores against kube-scheduler's own default plugins, verdict by verdict and plug-in
by plug-in, on each tested release.

kube-scheduler (default plugins) calls the recording extender with exactly the nodes its plugins
found feasible; the recorder asks our replica about every node of the test, and for its plug-ins'
scores on the nodes kube-scheduler goes on to score, which kube-scheduler logs at ``--v=10``. Pods are
created one at a time on a seeded cluster, each waited for until it is bound (and our snapshot
has it) or found unschedulable (then deleted, so it is never retried on a later state), so both
sides judge every pod on the same cluster. Every few pods a share of the bound ones is deleted to free
room, and the stream pauses until kube-scheduler's cache has surely seen the deletions too.

Every pod has the same priority, so nothing is preempted and no pod is nominated: those paths are
covered by table tests (tests/unit/test_preemption_fidelity.py, tests/unit/test_filter_nominated.py)
and by the preemption scenarios run on every release, as is in-place resize. Our replica follows the
release it reads from the API server.
"""

from __future__ import annotations

import json
import random
import re
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack import http_client
from devstack.controlplane import ControlPlane, utc_now
from devstack.kube import MERGE, Kube, wait_for
from devstack.replica import ServerProcess
from devstack.scheduler import KubeScheduler
from extenders.policy import DEFAULT_PRIORITIES
from tests.e2e.fidelity_stream import NodeSpec, gen_nodes, gen_pod
from tests.e2e.recording_extender import FilterCall, RecordingExtender
from tests.plugins.e2e_tier import report

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]

SEED = 20261123
PODS = 260
CHURN_EVERY = 15  # pods between two rounds of deletions
CHURN_SHARE = 0.4  # of the bound pods, deleted in each round
CHURN_PAUSE = 1.0  # seconds for kube-scheduler's cache to drop them (nothing tells when it has)
# How far our score may be from kube-scheduler's, in points of 0..100 per unit of weight: its plug-ins
# truncate to integers where we keep fractions (once; twice for a mean of truncated resource scores,
# or a change of truncated balances). Anything further is a difference of rule.
ROUNDING = {"NodeResourcesFit": 2.0, "NodeResourcesBalancedAllocation": 2.0}
WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "PodTopologySpread": 2, "InterPodAffinity": 2}
# kube-scheduler's reason (1.32 on) for the nodes a PreFilter result left out.
OUTSIDE_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
PLUGIN_SCORE = re.compile(
    r'"Plugin scored node for pod" pod="(?P<pod>[^"]+)" plugin="(?P<plugin>[^"]+)" node="(?P<node>[^"]+)" '
    r"score=(?P<score>-?\d+)"
)


class Fidelity:
    """The test's cluster: nodes, namespaces, one replica, the recorder and a kube-scheduler."""

    def __init__(self, plane: ControlPlane, kube: Kube, redis_url: str, workdir: Path, rng: random.Random) -> None:
        self.kube = kube
        self.rng = rng
        self.version = plane.version
        self.minor = int(plane.version.split(".")[1])
        self.run = f"fid-{secrets.token_hex(3)}"
        self.namespaces = (f"{self.run}-a", f"{self.run}-b")
        kube.create_namespace(self.namespaces[0], {"fidelity": "main"})
        kube.create_namespace(self.namespaces[1], {"fidelity": "other"})
        self.nodes = gen_nodes(rng, self.run)
        self.node_names = [n.name for n in self.nodes]
        for spec in self.nodes:
            self._create_node(spec)
        kubeconfig = workdir / "extender.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(plane.kubeconfig_document(plane.extender_token)))
        env = {
            "EXTENDER_REDIS_URL": redis_url,
            "EXTENDER_REDIS_PREFIX": self.run,
            "EXTENDER_KUBE_MODE": "on",
            "KUBECONFIG": str(kubeconfig),
        }
        self.replica = ServerProcess(env, f"{self.run}-r1")
        self.recorder: RecordingExtender | None = None
        self.scheduler: KubeScheduler | None = None
        self.replica.wait_ready(60)
        self._wait_synced()
        self.recorder = RecordingExtender(self.replica.url, self.node_names, dict(DEFAULT_PRIORITIES))
        # --v=10: each plug-in's score per node is logged.
        self.scheduler = KubeScheduler(plane, self.run, [self.recorder.entry()], workdir, verbosity=10)
        time.sleep(1)  # kube-scheduler's informers list the nodes
        # 1.28 counts an image's nodes as they were when each node entered its cache (kubernetes
        # #116938): one update of every node, now that all are there, brings the counts up to date.
        for name in self.node_names:
            listed = {"metadata": {"labels": {"listed": "yes"}}}
            self.kube.http.patch(f"/api/v1/nodes/{name}", json=listed, headers=MERGE)
        wait_for(lambda: all(self._labelled(n) for n in self.node_names), 30, "the replica sees the relabelled nodes")
        time.sleep(1)

    def _create_node(self, spec: NodeSpec) -> None:
        self.kube.create_node(
            spec.name,
            cpu=spec.cpu,
            memory=spec.memory,
            pods=spec.pods,
            extended=spec.extended,
            labels=spec.labels,
            taints=spec.taints,
            images=spec.images,
        )
        if spec.unschedulable:
            self.kube.http.patch(f"/api/v1/nodes/{spec.name}", json={"spec": {"unschedulable": True}}, headers=MERGE)
        if spec.conditions:
            now = utc_now()
            conditions = {"Ready": "True", **spec.conditions}
            status = {
                "conditions": [
                    {"type": t, "status": s, "reason": "Fidelity", "lastHeartbeatTime": now, "lastTransitionTime": now}
                    for t, s in conditions.items()
                ]
            }
            resp = self.kube.http.patch(f"/api/v1/nodes/{spec.name}/status", json={"status": status}, headers=MERGE)
            resp.raise_for_status()

    def _labelled(self, name: str) -> bool:
        doc = self._node_doc(name)
        return doc is not None and (doc.get("labels") or {}).get("listed") == "yes"

    def _node_doc(self, name: str) -> dict[str, Any] | None:
        resp = http_client.get(f"{self.replica.url}/v1/nodes/{name}", timeout=5)
        return resp.json() if resp.status_code == 200 else None

    def _wait_synced(self) -> None:
        def synced() -> bool:
            for spec in self.nodes:
                doc = self._node_doc(spec.name)
                if doc is None or doc["unschedulable"] != spec.unschedulable:
                    return False
                if any(doc["conditions"].get(t) != s for t, s in spec.conditions.items()):
                    return False
            return True

        wait_for(synced, 60, "the replica's snapshot has every node as created")

    def _has_pod(self, node: str, namespace: str, name: str) -> bool:
        doc = self._node_doc(node)
        return doc is not None and any(p["namespace"] == namespace and p["name"] == name for p in doc["pods"])

    def outcome(self, namespace: str, name: str) -> tuple[str, str]:
        """("bound", node) or ("unschedulable", message), once kube-scheduler has decided."""

        def decided() -> tuple[str, str] | None:
            pod = self.kube.get(f"/api/v1/namespaces/{namespace}/pods/{name}") or {}
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                return "bound", node
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    return "unschedulable", cond.get("message") or ""
            return None

        try:
            return wait_for(decided, 30, f"kube-scheduler decides {namespace}/{name}", interval=0.03)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from None

    def wait_placed(self, node: str, namespace: str, name: str) -> None:
        wait_for(lambda: self._has_pod(node, namespace, name), 20, f"our snapshot has {name} on {node}", 0.03)

    def delete(self, namespace: str, name: str, node: str | None) -> None:
        self.kube.delete_pod(namespace, name)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        wait_for(lambda: self.kube.get(path) is None, 20, f"{name} deleted", 0.03)
        if node:
            wait_for(lambda: not self._has_pod(node, namespace, name), 20, f"our snapshot drops {name}", 0.03)

    def placement_diff(self) -> str:
        """Pods the API and our snapshot place differently (empty when both agree)."""
        api: set[tuple[str, str, str]] = set()
        for namespace in self.namespaces:
            for pod in self.kube.pods(namespace):
                node = pod["spec"].get("nodeName")
                if node:
                    api.add((namespace, pod["metadata"]["name"], node))
        ours: set[tuple[str, str, str]] = set()
        for node in self.node_names:
            for pod in (self._node_doc(node) or {}).get("pods", []):
                if pod["namespace"] in self.namespaces:
                    ours.add((pod["namespace"], pod["name"], node))
        parts = []
        if api - ours:
            parts.append(f"only the API has {sorted(api - ours)}")
        if ours - api:
            parts.append(f"only our snapshot has {sorted(ours - api)}")
        return "; ".join(parts)

    def node_state(self, node: str) -> str:
        """What the API and our snapshot hold on ``node``, for a mismatch report."""
        pods = []
        for namespace in self.namespaces:
            for pod in self.kube.pods(namespace):
                if pod["spec"].get("nodeName") == node:
                    requests = [c.get("resources", {}).get("requests", {}) for c in pod["spec"]["containers"]]
                    pods.append(f"{pod['metadata']['name']}{requests}")
        doc = self._node_doc(node) or {}
        return f"API pods {pods}; our requested {doc.get('requested')} of {doc.get('allocatable')}"

    def logs(self) -> str:
        parts = [f"--- replica\n{self.replica.log()}"]
        if self.scheduler is not None:
            parts.append(f"--- kube-scheduler\n{self.scheduler.log()}")
        return "\n".join(parts)

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.recorder is not None:
            self.recorder.stop()
        self.replica.stop()
        for namespace in self.namespaces:
            self.kube.delete_namespace_pods(namespace)
        for name in self.node_names:
            self.kube.delete_node(name)


@pytest.fixture
def fidelity(
    control_plane: ControlPlane, kube: Kube, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fidelity]:
    f = Fidelity(control_plane, kube, redis_url, tmp_path_factory.mktemp("fidelity"), random.Random(SEED))
    try:
        yield f
    finally:
        f.stop()


def scheduler_histogram(message: str) -> tuple[int, Counter[str]]:
    """(nodes, reason -> node count) from kube-scheduler's "0/N nodes are available: ..." message;
    the histogram ends at its first full stop, before what PostFilter plug-ins add (preemption, and
    DRA's "no new claims to deallocate" from 1.34 to 1.36)."""
    found = re.match(r"0/(\d+) nodes are available: (.*?)\.(?: |$)", message)
    assert found, f"unexpected kube-scheduler message: {message!r}"
    counts: Counter[str] = Counter()
    for part in found.group(2).split(", "):
        count, reason = part.split(" ", 1)
        counts[reason] += int(count)
    return int(found.group(1)), counts


def kube_scores(log: str) -> dict[str, dict[str, dict[str, int]]]:
    """pod -> node -> plug-in -> score, from kube-scheduler's ``--v=10`` log (the last attempt's)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for line in log.splitlines():
        found = PLUGIN_SCORE.search(line)
        if found:
            out.setdefault(found["pod"], {}).setdefault(found["node"], {})[found["plugin"]] = int(found["score"])
    return out


def score_differences(ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, int]]) -> list[str]:
    """Where a plug-in's score differs by more than kube-scheduler's integer rounding. A plug-in one
    side does not report (kube-scheduler skips it, or we do not run it) scores 0 there."""
    out = []
    for node in sorted(set(ours) | set(theirs)):
        mine, kube = ours.get(node, {}), theirs.get(node, {})
        for plugin in sorted(set(mine) | set(kube)):
            weight = WEIGHTS.get(plugin, 1)
            gap = abs(mine.get(plugin, 0.0) - kube.get(plugin, 0)) / weight
            if gap >= ROUNDING.get(plugin, 1.0):
                out.append(f"{node} {plugin}: ours {mine.get(plugin, 0.0):.2f}, kube-scheduler {kube.get(plugin, 0)}")
    return out


def our_histogram(reasons: dict[str, str]) -> Counter[str]:
    """The same histogram from our per-node reasons (a node may fail for several resources at once)."""
    return Counter(part for reason in reasons.values() for part in reason.split(", "))


def prefiltered_nodes(pod: dict[str, Any]) -> set[str] | None:
    """The nodes NodeAffinity's PreFilter restricts kube-scheduler to, when every required term names
    nodes with ``metadata.name In``: kube-scheduler evaluates (and counts in its message) only those."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    named: set[str] = set()
    for term in terms:
        in_term: set[str] | None = None
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                values = set(field.get("values") or [])
                in_term = values if in_term is None else in_term & values
        if in_term is None:
            return None
        named |= in_term
    return named if terms else None


def _describe(call: FilterCall) -> str:
    lines = [f"{call.key}: {json.dumps(call.pod.get('spec'), sort_keys=True)}"]
    if call.error:
        lines.append(f"  our error: {call.error}")
    if call.scheduler_message:
        lines.append(f"  kube-scheduler: {call.scheduler_message}")
    if call.diagnosis:
        lines.append(f"  {call.diagnosis}")
    for node in sorted(call.theirs - call.ours):
        lines.append(f"  {node}: kube-scheduler passes it, we refuse: {call.reasons.get(node, '?')}")
    for node in sorted(call.ours - call.theirs):
        lines.append(f"  {node}: kube-scheduler refuses it, we pass it")
    if call.direct:
        lines.append(f"  our reasons: {dict(sorted(our_histogram(call.reasons).items()))}")
    return "\n".join(lines)


# Its pods go one at a time through the real scheduler: about 35 s alone, several times that while
# CI runs the other tiers beside it on the same two cores.
@pytest.mark.timeout(480)
def test_our_filter_verdicts_equal_kube_schedulers_default_plugins(fidelity: Fidelity) -> None:
    rng = fidelity.rng
    bound: list[tuple[str, str, str]] = []  # (namespace, name, node)
    unschedulable = 0
    direct: list[FilterCall] = []  # pods kube-scheduler found no node for (it calls no extender then)
    for index in range(PODS):
        namespace, body = gen_pod(rng, index, fidelity.run, fidelity.namespaces, fidelity.node_names, fidelity.minor)
        name = body["metadata"]["name"]
        created = fidelity.kube.create_pod(namespace, body)
        state, where = fidelity.outcome(namespace, name)
        assert fidelity.recorder is not None
        for call in fidelity.recorder.calls_for(f"{namespace}/{name}"):
            if call.theirs != call.ours:
                call.diagnosis = f"placement then: {fidelity.placement_diff() or 'the same on both sides'}"
                for node in sorted(call.theirs ^ call.ours):
                    call.diagnosis += f"\n    {node}: {fidelity.node_state(node)}"
        if state == "bound":
            fidelity.wait_placed(where, namespace, name)
            bound.append((namespace, name, where))
        else:
            unschedulable += 1
            if not fidelity.recorder.calls_for(f"{namespace}/{name}"):
                ours, reasons, error = fidelity.recorder.ask(created)
                direct.append(FilterCall(created, set(), ours, reasons, error, scheduler_message=where, direct=True))
            fidelity.delete(namespace, name, None)
        if index % CHURN_EVERY == CHURN_EVERY - 1 and bound:
            for gone in rng.sample(bound, int(len(bound) * CHURN_SHARE)):
                bound.remove(gone)
                fidelity.delete(*gone)
            time.sleep(CHURN_PAUSE)
    calls = fidelity.recorder.calls if fidelity.recorder is not None else []
    compared = [*calls, *direct]
    mismatches = [c for c in compared if c.error or c.theirs != c.ours]
    # Where kube-scheduler found no node, its message counts each node's first failure by reason:
    # ours must count the same (same order of plug-ins, same messages).
    for call in direct:
        nodes, theirs = scheduler_histogram(call.scheduler_message)
        assert nodes == len(fidelity.node_names), f"other nodes are in the cluster: {call.scheduler_message}"
        evaluated = prefiltered_nodes(call.pod)
        reasons = {n: r for n, r in call.reasons.items() if evaluated is None or n in evaluated}
        if evaluated is not None and fidelity.minor >= 32:
            # From 1.32 the nodes NodeAffinity's PreFilter left out are counted, under their own reason.
            reasons.update({n: OUTSIDE_PREFILTER for n in call.reasons if n not in evaluated})
        if theirs != our_histogram(reasons) and call not in mismatches:
            mismatches.append(call)
    # Scores, plug-in by plug-in, where kube-scheduler scored (two nodes or more passed).
    assert fidelity.scheduler is not None
    logged = kube_scores(fidelity.scheduler.process.log_path.read_text(errors="replace"))
    scored = [c for c in calls if c.scores and c.key in logged]
    score_mismatches = [(c, diff) for c in scored if (diff := score_differences(c.scores, logged[c.key]))]
    pairs = sum(len(c.scores) for c in scored)
    verdicts = len(compared) * len(fidelity.node_names)
    report(
        f"fidelity vs kube-scheduler v{fidelity.version}: {PODS} pods ({PODS - unschedulable} bound, {unschedulable} "
        f"unschedulable), {len(calls)} filter calls + {len(direct)} pods no node fitted, {verdicts} verdicts "
        f"over {len(fidelity.node_names)} nodes compared, {len(direct)} failure messages compared, "
        f"{len(mismatches)} mismatching pods; {len(scored)} pods scored on {pairs} pod-node pairs, plug-in scores "
        f"beyond integer rounding: {len(score_mismatches)} pods"
    )
    assert not mismatches, f"{len(mismatches)} of {len(compared)} pods judged differently:\n" + "\n".join(
        _describe(c) for c in mismatches[:15]
    )
    assert len(calls) >= PODS // 2, "kube-scheduler called the extender for too few pods to compare"
    assert len(scored) >= PODS // 4, f"kube-scheduler logged scores for too few pods ({len(scored)}) to compare"
    assert not score_mismatches, f"{len(score_mismatches)} of {len(scored)} pods scored differently:\n" + "\n".join(
        f"{c.key}: {json.dumps(c.pod.get('spec'), sort_keys=True)}\n  " + "\n  ".join(diff[:8])
        for c, diff in score_mismatches[:10]
    )
