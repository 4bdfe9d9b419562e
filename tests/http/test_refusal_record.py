"""A pod filter refused on every node is kept for the watch leader's writes to hand back (and requeue):
kept long enough for a watcher that held an event longer than the usual window."""

from __future__ import annotations

import time

import redis
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from extenders.kube.requeue import REFUSAL_WINDOW_SECONDS
from tests.http.test_verbs import node, pod


def test_a_refusal_is_kept_past_the_window_while_later_refusals_are_recorded(
    redis_url: str, redis_prefix: str, redis_sync: redis.Redis
) -> None:
    settings = Settings(redis_url=redis_url, redis_prefix=redis_prefix, kube_mode="off")
    nodes = {"items": [node("kept-0", cpu="1"), node("kept-1", cpu="1")]}
    early, late = pod("early", cpu="2"), pod("late", cpu="2")
    with TestClient(create_app(settings)) as client:
        for refused in (early, late):
            answer = client.post("/filter", json={"Pod": refused, "Nodes": nodes}).json()
            assert answer["Nodes"]["items"] == [] and answer["Error"] == ""
            if refused is early:
                time.sleep(REFUSAL_WINDOW_SECONDS + 0.3)
    kept = set(redis_sync.zrange(f"{redis_prefix}:refused", 0, -1))
    assert kept == {early["metadata"]["uid"].encode(), late["metadata"]["uid"].encode()}
