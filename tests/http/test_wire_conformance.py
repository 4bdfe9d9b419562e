"""Every request body captured from a real kube-scheduler is accepted, and answers have the right shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.wire_captures import capture_paths

CAPTURES = capture_paths()


def _check_filter(request: dict[str, Any], body: dict[str, Any]) -> None:
    assert set(body) >= {"FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert isinstance(body["FailedNodes"], dict)
    assert isinstance(body["FailedAndUnresolvableNodes"], dict)
    assert isinstance(body["Error"], str)
    if request.get("NodeNames") is not None:
        asked = set(request["NodeNames"])
        assert body["Nodes"] is None
        assert isinstance(body["NodeNames"], list)
        named = set(body["NodeNames"]) | set(body["FailedNodes"]) | set(body["FailedAndUnresolvableNodes"])
        # nodeCacheCapable answers may only name nodes that were asked about.
        assert named <= asked
    else:
        assert body["NodeNames"] is None
        sent = {i["metadata"]["name"]: i for i in request["Nodes"]["items"]}
        for item in body["Nodes"]["items"]:
            assert item == sent[item["metadata"]["name"]], "passing nodes must be echoed unchanged"


def _check_prioritize(request: dict[str, Any], body: Any) -> None:
    assert isinstance(body, list)
    names = request.get("NodeNames") or [i["metadata"]["name"] for i in request["Nodes"]["items"]]
    assert [e["Host"] for e in body] == names
    for entry in body:
        assert set(entry) == {"Host", "Score"}
        assert isinstance(entry["Score"], int) and 0 <= entry["Score"] <= 10


def _check_preempt(request: dict[str, Any], body: dict[str, Any]) -> None:
    assert set(body) == {"NodeNameToMetaVictims"}
    asked = request.get("NodeNameToMetaVictims") or request.get("NodeNameToVictims") or {}
    for node, victims in body["NodeNameToMetaVictims"].items():
        assert node in asked
        assert victims["Pods"], "kube-scheduler rejects a node with no victims"
        assert all(set(p) == {"UID"} for p in victims["Pods"])
        assert isinstance(victims["NumPDBViolations"], int)


def _check_bind(request: dict[str, Any], body: dict[str, Any]) -> None:
    assert set(body) == {"Error"} and isinstance(body["Error"], str)


CHECKS = {"filter": _check_filter, "prioritize": _check_prioritize, "preempt": _check_preempt, "bind": _check_bind}


def test_every_capture_is_present_for_every_verb() -> None:
    verbs = {p.name.split("-", 1)[0] for p in CAPTURES}
    assert verbs == set(CHECKS), f"captures cover {sorted(verbs)}"


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_capture_is_accepted(capture: Path, http: httpx.Client) -> None:
    verb = capture.name.split("-", 1)[0]
    raw = capture.read_bytes()
    response = http.post(f"/{verb}", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    CHECKS[verb](json.loads(raw), response.json())
