"""NodePorts (PodFitsHostPorts): host ports in use on the node, by protocol and address."""

from __future__ import annotations

from typing import Any

import pytest

from extenders.plugins.framework import Verdict
from tests.plugin_cases import make_node, make_pod, run_predicate


def _port(host_port: int, protocol: str = "TCP", host_ip: str = "") -> dict[str, Any]:
    port: dict[str, Any] = {"containerPort": host_port, "hostPort": host_port, "protocol": protocol}
    if host_ip:
        port["hostIP"] = host_ip
    return port


def _with_ports(name: str, ports: list[dict[str, Any]]) -> Any:
    return make_pod(name, spec={"containers": [{"name": "c", "ports": ports}]})


PORT_FAIL = Verdict(False, "node(s) didn't have free ports for the requested pod ports")


@pytest.mark.parametrize(
    ("wanted", "used", "fit"),
    [
        ([], [_port(80)], True),
        ([_port(80)], [], True),
        ([_port(80)], [_port(8080)], True),
        ([_port(80)], [_port(80)], False),
        ([_port(80, "UDP")], [_port(80, "TCP")], True),
        ([_port(80, "TCP", "10.0.0.1")], [_port(80, "TCP", "10.0.0.2")], True),
        ([_port(80, "TCP", "10.0.0.1")], [_port(80, "TCP", "10.0.0.1")], False),
        # 0.0.0.0 conflicts with every address, in both directions.
        ([_port(80, "TCP", "0.0.0.0")], [_port(80, "TCP", "10.0.0.1")], False),
        ([_port(80, "TCP", "10.0.0.1")], [_port(80, "TCP", "0.0.0.0")], False),
        ([_port(80, "UDP", "0.0.0.0")], [_port(80, "TCP", "10.0.0.1")], True),
        ([_port(443), _port(80)], [_port(80)], False),
    ],
)
def test_pod_fits_host_ports(wanted: list[dict[str, Any]], used: list[dict[str, Any]], fit: bool) -> None:
    node = make_node(pods=[_with_ports("existing", used)])
    verdict = run_predicate("PodFitsHostPorts", _with_ports("p", wanted), node)
    assert verdict == (Verdict(True) if fit else PORT_FAIL)
    assert not verdict.unresolvable


def _in(where: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    """A spec with ``ports`` on a regular container, a plain init container or a sidecar."""
    container: dict[str, Any] = {"name": where, "ports": ports}
    if where == "containers":
        return {"containers": [container]}
    if where == "sidecar":
        container["restartPolicy"] = "Always"
    return {"containers": [{"name": "c"}], "initContainers": [container]}


@pytest.mark.parametrize(
    ("incoming", "existing", "fit"),
    [
        ("containers", "containers", False),
        ("sidecar", "containers", False),
        ("containers", "sidecar", False),
        ("sidecar", "sidecar", False),
        # A plain init container has exited before the pod runs: its ports are never held.
        ("init", "containers", True),
        ("containers", "init", True),
        ("init", "sidecar", True),
        ("sidecar", "init", True),
    ],
)
def test_only_containers_and_sidecars_hold_host_ports(incoming: str, existing: str, fit: bool) -> None:
    node = make_node(pods=[make_pod("existing", spec=_in(existing, [_port(80)]))])
    verdict = run_predicate("PodFitsHostPorts", make_pod("p", spec=_in(incoming, [_port(80)])), node)
    assert verdict == (Verdict(True) if fit else PORT_FAIL)
