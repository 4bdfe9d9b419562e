"""labelSelector and fieldSelector query parameters: parsing and matching, with the real grammar."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request
from .resources import ResourceType

Matcher = Callable[[dict[str, Any]], bool]

_SET_REQ = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\((.*)\)\s*$")
_CMP_REQ = re.compile(r"^\s*([^\s!=<>]+)\s*(==|=|!=|<|>)\s*(\S*)\s*$")
_EXISTS_REQ = re.compile(r"^\s*(!?)\s*([^\s!=<>(),]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def _label_requirement(req: str) -> Callable[[dict[str, str]], bool]:
    if m := _SET_REQ.match(req):
        key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
        if op == "in":
            return lambda labels: key in labels and labels[key] in values
        return lambda labels: key not in labels or labels[key] not in values
    if m := _CMP_REQ.match(req):
        key, op, value = m.groups()
        if op in ("=", "=="):
            return lambda labels: labels.get(key) == value
        if op == "!=":
            return lambda labels: labels.get(key) != value
        try:
            bound = int(value)
        except ValueError:
            raise bad_request(
                f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {value}"
            ) from None
        if op == ">":
            return lambda labels: key in labels and labels[key].lstrip("-").isdigit() and int(labels[key]) > bound
        return lambda labels: key in labels and labels[key].lstrip("-").isdigit() and int(labels[key]) < bound
    if m := _EXISTS_REQ.match(req):
        negate, key = m.group(1) == "!", m.group(2)
        return (lambda labels: key not in labels) if negate else (lambda labels: key in labels)
    raise bad_request(f"unable to parse requirement: {req!r}")


def label_matcher(selector: str | None) -> Matcher:
    reqs = [_label_requirement(r) for r in _split_top_level(selector or "")]

    def match(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r(labels) for r in reqs)

    return match


def field_value(obj: dict[str, Any], path: str) -> str:
    """The string form the apiserver compares: missing fields are "", booleans are true/false."""
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_matcher(selector: str | None, rtype: ResourceType) -> Matcher:
    reqs: list[tuple[str, bool, str]] = []
    for part in _split_top_level(selector or ""):
        m = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        key, op, value = m.groups()
        if key not in rtype.field_labels:
            raise bad_request(f"field label not supported: {key}")
        reqs.append((key, op != "!=", value))

    def match(obj: dict[str, Any]) -> bool:
        return all((field_value(obj, key) == value) == eq for key, eq, value in reqs)

    return match
