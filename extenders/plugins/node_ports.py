"""PodFitsHostPorts: kube-scheduler's NodePorts filter.

A wanted (protocol, ip, port) conflicts with a used one of the same protocol and port when
either side binds the wildcard 0.0.0.0 or both bind the same address. Resolvable.
"""

from __future__ import annotations

from typing import Any

from extenders.model import WILDCARD_IP, HostPort, NodeInfo, PodInfo
from extenders.plugins.framework import FIT, SKIP, NodeFamily, Verdict
from extenders.snapshot import Snapshot

REASON = "node(s) didn't have free ports for the requested pod ports"
_FAIL = Verdict(False, REASON)


def ports_conflict(wanted: list[HostPort] | tuple[HostPort, ...], used: set[HostPort]) -> bool:
    """Whether any wanted host port collides with the used set (0.0.0.0 matches every address)."""
    if not used:
        return False
    for protocol, ip, port in wanted:
        if ip == WILDCARD_IP:
            for u_protocol, _u_ip, u_port in used:
                if u_port == port and u_protocol == protocol:
                    return True
        elif (protocol, ip, port) in used or (protocol, WILDCARD_IP, port) in used:
            return True
    return False


class NodePortsFilter:
    node_families = (NodeFamily.PORTS,)

    def prepare(self, pod: PodInfo, snapshot: Snapshot) -> Any:
        return tuple(pod.host_ports) if pod.host_ports else SKIP

    def check(self, pod: PodInfo, node: NodeInfo, state: Any) -> Verdict:
        return _FAIL if ports_conflict(state, node.used_ports) else FIT
