"""NodeName (PodFitsHost): the pod's spec.nodeName, when set, is the only node it fits."""

from __future__ import annotations

from extenders.plugins.framework import Verdict
from tests.plugin_cases import make_node, make_pod, run_predicate


def test_pod_fits_host() -> None:
    fail = Verdict(False, "node(s) didn't match the requested node name", True)
    assert run_predicate("PodFitsHost", make_pod(), make_node("n1")) == Verdict(True)
    assert run_predicate("PodFitsHost", make_pod(node_name="n1"), make_node("n1")) == Verdict(True)
    assert run_predicate("PodFitsHost", make_pod(node_name="n2"), make_node("n1")) == fail
