"""An extender that kube-scheduler calls in front of our replica, to compare their verdicts.

Registered with ``nodeCacheCapable: true`` and only a filter verb, it receives the nodes
kube-scheduler's own default plugins found feasible, asks our replica's ``/filter`` about every
node of the test, records both answers, and hands kube-scheduler our verdict on its nodes. It also
asks our replica's ``/v1/explain`` for each plug-in's score on the nodes kube-scheduler goes on to
score (those both sides pass), to compare with the scores kube-scheduler logs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from app.serving.embedded_redis import free_port
from devstack import http_client
from tests.http_stub import reply


@dataclass
class FilterCall:
    pod: dict[str, Any]
    theirs: set[str]  # the nodes kube-scheduler's plugins passed (of the compared ones)
    ours: set[str]  # the nodes our replica passed (of the compared ones)
    reasons: dict[str, str] = field(default_factory=dict)  # our failure reason per refused node
    error: str = ""
    scheduler_message: str = ""  # kube-scheduler's own account, when it found no node (no call then)
    direct: bool = False  # asked by the test itself: kube-scheduler found no node and called no extender
    diagnosis: str = ""  # what the test saw of both sides when the verdicts differed
    # Our score per kube-scheduler plug-in name per node, normalised to 0..100 and weighted as
    # kube-scheduler logs its own; empty when fewer than two nodes were left to score.
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        meta = self.pod.get("metadata") or {}
        return f"{meta.get('namespace')}/{meta.get('name')}"


class RecordingExtender:
    def __init__(self, replica_url: str, nodes: Sequence[str], weights: dict[str, int] | None = None) -> None:
        """``weights``: each of our priorities' weight (the replica's policy), by our name."""
        self.replica_url = replica_url
        self.nodes = list(nodes)
        self.weights = weights or {}
        self.calls: list[FilterCall] = []
        self._lock = threading.Lock()
        self._client = http_client.client(timeout=10)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-extender", daemon=True)
        self._thread.start()

    def entry(self) -> dict[str, Any]:
        """Its extender entry for a KubeSchedulerConfiguration."""
        return {
            "urlPrefix": self.url,
            "filterVerb": "filter",
            "weight": 1,
            "nodeCacheCapable": True,
            "httpTimeout": "10s",
            "ignorable": False,
        }

    def ask(self, pod: dict[str, Any]) -> tuple[set[str], dict[str, str], str]:
        """Our replica's verdict for ``pod`` over every compared node: (passing, reasons, error)."""
        resp = self._client.post(f"{self.replica_url}/filter", json={"Pod": pod, "NodeNames": self.nodes})
        if resp.status_code != 200:
            return set(), {}, f"HTTP {resp.status_code}: {resp.text[:500]}"
        answer = resp.json()
        reasons = {**(answer.get("FailedNodes") or {}), **(answer.get("FailedAndUnresolvableNodes") or {})}
        return set(answer.get("NodeNames") or []), reasons, answer.get("Error") or ""

    def explain_scores(self, pod: dict[str, Any], names: list[str]) -> dict[str, dict[str, float]]:
        """node -> kube-scheduler plug-in -> our score on kube-scheduler's scale (0..100 times the weight)."""
        resp = self._client.post(f"{self.replica_url}/v1/explain", json={"Pod": pod, "NodeNames": names})
        resp.raise_for_status()
        out: dict[str, dict[str, float]] = {}
        for node, entry in resp.json()["nodes"].items():
            out[node] = {
                detail["plugin"].split(" (")[0]: detail["score"] * 10 * self.weights.get(name, 1)
                for name, detail in entry["priorities"].items()
            }
        return out

    def calls_for(self, key: str) -> list[FilterCall]:
        with self._lock:
            return [c for c in self.calls if c.key == key]

    def _record(self, body: dict[str, Any]) -> dict[str, Any]:
        pod = body.get("Pod") or {}
        compared = set(self.nodes)
        theirs = set(body.get("NodeNames") or [])
        ours, reasons, error = self.ask(pod)
        call = FilterCall(pod, theirs & compared, ours & compared, reasons, error)
        scored = sorted(theirs & ours & compared)
        if not error and len(scored) >= 2:
            call.scores = self.explain_scores(pod, scored)
        with self._lock:
            self.calls.append(call)
        if error:
            return {"NodeNames": None, "FailedNodes": {}, "Error": error}
        passing = [n for n in body.get("NodeNames") or [] if n in ours or n not in compared]
        failed = {n: reasons.get(n, "refused by the extender") for n in theirs - set(passing)}
        return {"NodeNames": passing, "FailedNodes": failed, "Error": ""}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/filter"):
                    answer = recorder._record(body)
                    status = 200
                else:
                    answer, status = {"Error": f"unexpected verb {self.path}"}, 404
                reply(self, status, json.dumps(answer).encode(), "application/json")

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
