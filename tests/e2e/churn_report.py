"""What a churn violation needs to be understood from CI's output alone: the gang's pods as the API
server showed them at that moment, the extender's account of the gang, and the log lines that name it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

LOG_LINES_PER_GANG = 60


def pod_line(name: str, pod: dict[str, Any] | None) -> str:
    """One member: where it is bound or nominated, whether it is leaving, and kube-scheduler's last word."""
    if pod is None:
        return f"    {name}: gone"
    spec, status, meta = pod["spec"], pod.get("status") or {}, pod["metadata"]
    parts = [f"node={spec.get('nodeName') or '-'}"]
    if status.get("nominatedNodeName"):
        parts.append(f"nominated={status['nominatedNodeName']}")
    if meta.get("deletionTimestamp"):
        parts.append("deleting")
    for condition in status.get("conditions") or []:
        kind = condition.get("type")
        if kind == "DisruptionTarget" or (kind == "PodScheduled" and condition.get("status") != "True"):
            message = (condition.get("message") or "")[:300]
            parts.append(f"{kind}={condition.get('reason', '')}: {message}")
    return f"    {name}: " + ", ".join(parts)


def describe(
    gang: str,
    names: Iterable[str],
    pods: dict[str, dict[str, Any]],
    free: dict[str, int],
    doc: dict[str, Any] | None,
) -> str:
    """The gang at the moment of a violation, in a few lines."""
    lines = [f"  gang {gang}:"]
    lines += [pod_line(name, pods.get(name)) for name in names]
    lines.append(f"    extender: {doc if doc is not None else 'no document'}")
    lines.append(f"    free millicpu per node: {free}")
    return "\n".join(lines)


def related_log_lines(logs: str, gangs: Iterable[str], per_gang: int = LOG_LINES_PER_GANG) -> str:
    """The log lines (every replica's and kube-scheduler's) that name one of ``gangs`` or its pods,
    the last ``per_gang`` of each, under the section header they came from."""
    out: list[str] = []
    sections = re.split(r"^(--- .+)$", logs, flags=re.MULTILINE)
    for gang in dict.fromkeys(gangs):
        pattern = re.compile(rf"(?<![\w-]){re.escape(gang)}(?:-\d+)?(?![\w-])")
        found: list[str] = []
        header = ""
        for part in sections:
            if part.startswith("--- "):
                header = part[4:]
                continue
            found += [f"[{header}] {line}" for line in part.splitlines() if pattern.search(line)]
        out.append(f"--- log lines naming {gang} (last {per_gang} of {len(found)}):")
        out += found[-per_gang:]
    return "\n".join(out)
