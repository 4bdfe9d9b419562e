"""The scheduling policy: which predicates run in which order, which priorities with which weights.

A policy file (YAML or JSON) is read once at startup. Its format follows kube-scheduler's
classic Policy file: entries may be plain names or ``{name: ..., weight: ...}`` objects, and
classic priority names ending in ``Priority`` (``LeastRequestedPriority``) are accepted for
the registered name without it. A missing ``predicates`` or ``priorities`` key means the
built-in default list; an explicit empty list means none. Unknown names fail at load with
a message naming them and listing the known ones. See ``examples/policy.yaml``.
How weighted scores combine, and why NodePreferAvoidPods is a veto rather than a weight,
is documented in ``extenders.engine.scoring.score_nodes``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from extenders.plugins import names
from extenders.plugins.registry import FILTERS, SCORERS

# kube-scheduler's default profile: its filter plug-ins in its order, so the first failure reported
# for a node is the one kube-scheduler would report. Node conditions are not checked: the node
# lifecycle controller turns them into taints, which TaintToleration reads (the classic condition
# and pressure predicates stay available to policy files).
DEFAULT_PREDICATES: tuple[str, ...] = (
    names.NODE_UNSCHEDULABLE,
    names.NODE_NAME,
    names.TAINT_TOLERATION_FILTER,
    names.NODE_AFFINITY_FILTER,
    names.NODE_PORTS,
    names.NODE_RESOURCES_FIT,
    names.VOLUME_RESTRICTIONS,
    names.POD_TOPOLOGY_SPREAD,
    names.INTER_POD_AFFINITY_FILTER,
)
# The default profile's score plug-ins and weights (NodeResourcesFit scores LeastAllocated).
DEFAULT_PRIORITIES: tuple[tuple[str, int], ...] = (
    (names.TAINT_TOLERATION, 3),
    (names.NODE_AFFINITY, 2),
    (names.LEAST_REQUESTED, 1),
    (names.POD_TOPOLOGY_SPREAD, 2),
    (names.INTER_POD_AFFINITY, 2),
    (names.BALANCED_ALLOCATION, 1),
    (names.IMAGE_LOCALITY, 1),
)
DEFAULT_RESOURCE_WEIGHTS: dict[str, int] = {"cpu": 1, "memory": 1}


class PolicyError(ValueError):
    """A policy file that cannot be used; the message says what to fix."""


class PredicateEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str


class PriorityEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    weight: int = Field(default=1, ge=1)


def _entry_object(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


def _canonical(name: str, known: Mapping[str, object]) -> str:
    if name not in known and name.endswith("Priority") and name[: -len("Priority")] in known:
        return name[: -len("Priority")]
    return name


def _check_names(kind: str, names: list[str], known: Mapping[str, object]) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown {kind} {', '.join(repr(n) for n in unknown)}; known {kind} names: {', '.join(sorted(known))}"
        )
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{kind} {name!r} is listed twice")
        seen.add(name)


class Policy(BaseModel):
    """A validated policy. Field aliases are the file's camelCase keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kind: str | None = None
    api_version: str | None = Field(default=None, alias="apiVersion")
    predicates: tuple[PredicateEntry, ...] = tuple(PredicateEntry(name=n) for n in DEFAULT_PREDICATES)
    priorities: tuple[PriorityEntry, ...] = tuple(PriorityEntry(name=n, weight=w) for n, w in DEFAULT_PRIORITIES)
    resource_weights: dict[str, int] = Field(
        default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS), alias="resourceWeights"
    )
    hard_pod_affinity_symmetric_weight: int = Field(default=1, ge=0, le=100, alias="hardPodAffinitySymmetricWeight")
    always_check_all_predicates: bool = Field(default=False, alias="alwaysCheckAllPredicates")

    @field_validator("predicates", mode="before")
    @classmethod
    def _predicate_entries(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [_entry_object(v) for v in value]
        return value

    @field_validator("priorities", mode="before")
    @classmethod
    def _priority_entries(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            out = []
            for v in value:
                obj = _entry_object(v)
                if isinstance(obj, Mapping) and isinstance(obj.get("name"), str):
                    obj = {**obj, "name": _canonical(obj["name"], SCORERS)}
                out.append(obj)
            return out
        return value

    @field_validator("resource_weights")
    @classmethod
    def _positive_weights(cls, value: dict[str, int]) -> dict[str, int]:
        bad = [k for k, w in value.items() if w < 1]
        if bad:
            raise ValueError(f"resourceWeights must be positive integers: {', '.join(bad)}")
        if not value:
            raise ValueError("resourceWeights must name at least one resource")
        return value

    @model_validator(mode="after")
    def _known_names(self) -> Policy:
        _check_names("predicate", self.predicate_names, FILTERS)
        _check_names("priority", [p.name for p in self.priorities], SCORERS)
        return self

    @property
    def predicate_names(self) -> list[str]:
        return [p.name for p in self.predicates]

    @property
    def priority_weights(self) -> list[tuple[str, int]]:
        return [(p.name, p.weight) for p in self.priorities]


def default_policy() -> Policy:
    """The built-in policy: kube-scheduler's default profile."""
    try:
        return Policy()
    except ValidationError as exc:
        raise PolicyError(f"built-in policy is invalid: {_errors(exc)}") from exc


def _errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def parse_policy(data: Mapping[str, Any] | None, source: str = "policy") -> Policy:
    """Validate an already parsed policy document."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise PolicyError(f"{source}: a policy must be a mapping, got {type(data).__name__}")
    try:
        return Policy.model_validate(dict(data))
    except ValidationError as exc:
        raise PolicyError(f"{source}: {_errors(exc)}") from exc


def parse_policy_text(text: str, source: str = "policy") -> Policy:
    """Parse YAML or JSON text (JSON is tried first, YAML being its superset for our purpose)."""
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PolicyError(f"{source}: not valid YAML or JSON: {exc}") from exc
    return parse_policy(data, source)


def load_policy(path: str | None) -> Policy:
    """The policy in ``path`` (YAML or JSON), or the built-in default when ``path`` is None or empty."""
    if not path:
        return default_policy()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc}") from exc
    return parse_policy_text(text, path)
