"""Long-lived state under gang churn, through the real kube-scheduler: one Redis, the same two
replicas, and a seeded stream of changes with the invariants of tests/e2e/churn.py checked after
every step (several times a second).

``EXTENDER_CHURN_SECONDS`` sets the stream's length (120 s by default), ``EXTENDER_CHURN_SEED`` its
seed. At the end every pod is deleted: Redis must then hold nothing of the namespace's gangs, and
both replicas must have answered ``/v1/gangs`` alike just before.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import pytest
import redis

from devstack import http_client
from devstack.kube import wait_for
from devstack.stack import Stack
from tests.e2e.churn import Churn
from tests.e2e.churn_model import COMPLETE_SECONDS, VACANT_SECONDS
from tests.e2e.churn_report import related_log_lines
from tests.e2e.conftest import Cluster, StartStack
from tests.plugins.e2e_tier import report

pytestmark = [pytest.mark.e2e, pytest.mark.every_release]

CHURN_SECONDS = float(os.environ.get("EXTENDER_CHURN_SECONDS", "120"))
CHURN_SEED = int(os.environ.get("EXTENDER_CHURN_SEED", "29"))
# Gangs nobody touched for this long are forgotten even while their pods live (a completed gang
# whose pods run on): short, so that the stream shows it too.
IDLE_SECONDS = 20


@pytest.fixture(scope="module")
def stack(stack_factory: StartStack) -> Stack:
    return stack_factory(replicas=2, env={"EXTENDER_GANG_IDLE_SECONDS": str(IDLE_SECONDS)})


def comparable(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The documents without the fields that move with the clock."""
    moving = ("windowRemainingSeconds", "cooldownRemainingSeconds")
    return [{k: v for k, v in d.items() if k not in moving} for d in docs]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


@pytest.mark.timeout(CHURN_SECONDS + 240)
def test_a_stream_of_gang_churn_on_long_lived_state_keeps_every_invariant(
    cluster: Cluster, stack: Stack, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    churn = Churn(cluster, client, stack.name, [r.url for r in stack.replicas], CHURN_SEED, logs=stack.logs)
    churn.start()
    began = time.monotonic()
    churn.run(CHURN_SECONDS)
    if churn.violations:
        gangs = [name for name, _ in churn.details]
        context = related_log_lines(stack.logs(whole=True), gangs[:5]) if gangs else stack.logs()
        raise AssertionError("\n".join([*churn.violations[:20], *(d for _, d in churn.details[:10]), context]))
    figures = churn.figures
    assert figures.completed >= 10 and figures.cancelled >= 3 and figures.drained >= 1, figures

    # A quiet moment: both replicas answer /v1/gangs alike.
    def alike() -> bool:
        docs = [comparable(churn.gang_documents(r.url)) for r in stack.replicas]
        return docs[0] == docs[1]

    wait_for(alike, 15, "both replicas answer /v1/gangs alike")

    # Everything goes: nothing of the namespace's gangs may stay in Redis.
    cluster.kube.delete_namespace_pods(cluster.namespace)
    for gang in churn.gangs.values():
        if gang.scheme == "podgroup":
            cluster.kube.delete(
                f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{cluster.namespace}/podgroups/{gang.name}"
            )
    wait_for(lambda: not cluster.kube.pods(cluster.namespace), 30, "every pod gone")
    gone = time.monotonic()
    try:
        wait_for(lambda: not churn.leftovers(), 10, "no gang of the namespace left in Redis")
    except TimeoutError:
        raise AssertionError(f"left in Redis: {churn.leftovers()}") from None
    forgotten = time.monotonic() - gone
    for replica in stack.replicas:
        assert "Traceback" not in replica.log(), replica.log()[-4000:]
        assert http_client.get(f"{replica.url}/v1/gangs", timeout=5).status_code == 200
    waits = figures.waits
    report(
        f"gang churn: {CHURN_SECONDS:.0f} s (seed {CHURN_SEED}), {figures.gangs} gangs of three priorities "
        f"({figures.completed} completed, {figures.cancelled} cancelled, {figures.finished} finished, "
        f"{figures.preempted} preempted whole), {figures.plain} plain pods, "
        f"{figures.drained} nodes drained and {figures.restored} restored, invariants checked "
        f"{figures.checks} times; a gang that fits with nothing ahead completed in p50 "
        f"{statistics.median(waits) if waits else 0:.1f} s, p99 {percentile(waits, 0.99):.1f} s, max "
        f"{max(waits, default=0):.1f} s (gang {figures.slowest[0]}; bound {COMPLETE_SECONDS:.0f} s); "
        f"vacant holders over {VACANT_SECONDS} s: none; Redis empty of the namespace {forgotten:.1f} s after its "
        "last pod went; "
        f"the whole test {time.monotonic() - began:.0f} s"
    )
