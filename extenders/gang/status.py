"""The ``GET /v1/gangs`` documents: Redis bookkeeping joined with the snapshot's members."""

from __future__ import annotations

from typing import Any

from extenders.gang.membership import GangMembers, GangRef
from extenders.gang.state import GangRecord

STATES = ("waiting", "assembling", "permitted", "rejected", "cooling")


def _int(fields: dict[str, str], name: str) -> int | None:
    try:
        return int(float(fields[name]))
    except (KeyError, ValueError):
        return None


def _reason(state: str, fields: dict[str, str]) -> str:
    """Why the gang is where it is: its rejection, or why it last stood down while it waits."""
    if state in ("cooling", "rejected"):
        return fields.get("why", "")
    return fields.get("released", "") if state == "waiting" else ""


def gang_document(
    key: str, record: GangRecord | None, members: GangMembers | None, ref: GangRef | None, now_ms: int
) -> dict[str, Any]:
    namespace, _, name = key.partition("/")
    fields = record.fields if record else {}
    arrivals = record.arrivals if record else {}
    raw_state = fields.get("state", "")
    cool = _int(fields, "cool")
    deadline = _int(fields, "deadline")
    if raw_state == "permitted":
        state = "permitted"
    elif raw_state == "rejected":
        state = "cooling" if cool is not None and cool > now_ms else "rejected"
    elif arrivals or (record is not None and record.admitted):
        state = "assembling"
    else:
        state = "waiting"
    minimum = ref.min_member if ref is not None and ref.min_member is not None else _int(fields, "min")
    bound_uids = {p.uid for p in members.bound} if members else set()
    bound_uids.update(uid for uid, a in arrivals.items() if a.get("st") == "b")
    if state == "waiting" and minimum and len(bound_uids) >= minimum:
        state = "permitted"  # its bookkeeping was forgotten while its bound members run on
    window_left = (deadline - now_ms) / 1000 if state == "assembling" and deadline is not None else 0.0
    cool_left = (cool - now_ms) / 1000 if state == "cooling" and cool is not None else 0.0
    doc: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "minMember": minimum or 0,
        "members": members.count if members else 0,
        "arrived": [
            {"pod": a.get("pod", ""), "node": a.get("node", ""), "replica": a.get("replica", "")}
            for _, a in sorted(arrivals.items(), key=lambda kv: str(kv[1].get("pod", "")))
            if a.get("st") != "b"
        ],
        "bound": len(bound_uids),
        "state": state,
        "windowRemainingSeconds": round(max(window_left, 0.0), 3),
        "cooldownRemainingSeconds": round(max(cool_left, 0.0), 3),
        "admitted": bool(record.admitted) if record else False,
        "queuePosition": record.queue_position if record and record.queue_position > 0 else None,
        "reason": _reason(state, fields),
    }
    if members is not None:
        doc["pending"] = len(members.pending)
        doc["held"] = len(members.held)
    return doc
