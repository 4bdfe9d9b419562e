"""Reading what the fake API server answers: resource versions, watch events past the bookmarks."""

from __future__ import annotations

from typing import Any

from tests.fake_kube.client import WatchStream


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def next_event(stream: WatchStream, skip_bookmarks: bool = True) -> dict[str, Any]:
    while True:
        event = stream.next()
        assert event is not None, "watch closed early"
        if not (skip_bookmarks and event["type"] == "BOOKMARK"):
            return event
