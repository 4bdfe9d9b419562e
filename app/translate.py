"""Between kube-scheduler's extender/v1 wire types and the domain: requests read into PodInfo and
NodeFacts, domain outcomes written as the answers kube-scheduler expects.

Malformed input raises ``BadRequest`` (422); a domain failure is an answer with its ``Error`` field set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.kube_types import Node, Pod
from app.wire import ExtenderArgs, ExtenderPreemptionArgs
from extenders.model import NodeFacts, PodInfo
from extenders.preemption import MetaVictims
from extenders.quantity import QuantityError
from extenders.scheduling import FilterOutcome, NodeScores
from extenders.sync import convert


class BadRequest(Exception):
    """The request is well-formed JSON of the right shape but says something impossible."""


def pod_info(pod: Pod) -> PodInfo:
    """The scheduling view of a wire pod; bad quantities are the caller's fault (4xx)."""
    try:
        return convert.pod_info(pod.as_json())
    except (QuantityError, ValueError, TypeError) as exc:
        raise BadRequest(f"Pod: {exc}") from exc


def node_facts(nodes: list[Node]) -> list[NodeFacts]:
    """The scheduling view of the node objects a request carried whole."""
    facts: list[NodeFacts] = []
    for item in nodes:
        try:
            facts.append(convert.node_facts(item.as_json()))
        except (QuantityError, ValueError, TypeError) as exc:
            raise BadRequest(f"Nodes.items[{item.metadata.name}]: {exc}") from exc
    return facts


def candidate_names(args: ExtenderArgs) -> list[str]:
    if args.NodeNames is not None:
        return list(args.NodeNames)
    if args.Nodes is not None:
        return [item.metadata.name for item in args.Nodes.items]
    return []


def whole_nodes(args: ExtenderArgs) -> list[Node] | None:
    """The candidates as node objects (nodeCacheCapable: false), None when they came as names."""
    return args.Nodes.items if args.NodeNames is None and args.Nodes is not None else None


def preemption_candidates(
    args: ExtenderPreemptionArgs,
) -> tuple[dict[str, list[str]], dict[str, PodInfo] | None]:
    """kube-scheduler's candidates (node -> victim UIDs) and, when it sent them whole, the victims by UID."""
    candidates: dict[str, list[str]] = {}
    victim_pods: dict[str, PodInfo] | None = None
    if args.NodeNameToMetaVictims is not None:
        candidates = {n: [p.UID for p in m.Pods] for n, m in args.NodeNameToMetaVictims.items()}
    elif args.NodeNameToVictims is not None:
        victim_pods = {}
        for node, victims in args.NodeNameToVictims.items():
            infos = [pod_info(p) for p in victims.Pods]
            candidates[node] = [i.uid for i in infos]
            victim_pods.update({i.uid: i for i in infos})
    return candidates, victim_pods


def filter_answer(items: list[Node] | None, outcome: FilterOutcome) -> dict[str, Any]:
    """ExtenderFilterResult, in the form the candidates came in (``items``: as node objects)."""
    passing = outcome.passing
    answer: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": outcome.failed,
        "FailedAndUnresolvableNodes": outcome.unresolvable,
        "Error": outcome.error,
    }
    if items is not None:
        keep = set(passing)
        # Echo the very objects that came in (only the fields that were sent), in request order.
        answer["Nodes"] = {"metadata": {}, "items": [i.as_json() for i in items if i.metadata.name in keep]}
    else:
        answer["NodeNames"] = passing
    return answer


def prioritize_answer(scores: NodeScores) -> list[dict[str, Any]]:
    """A list of HostPriority (built already when the scores were computed ahead of their call)."""
    answer: list[dict[str, Any]] | None = scores.answer
    return answer if answer is not None else host_priorities(scores)


def host_priorities(scores: NodeScores) -> list[dict[str, Any]]:
    return [{"Host": node, "Score": score} for node, score in scores.items()]


def preemption_answer(nodes: Mapping[str, MetaVictims]) -> dict[str, Any]:
    """ExtenderPreemptionResult: the victims' UIDs per node kept."""
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in meta.uids], "NumPDBViolations": meta.num_pdb_violations}
            for node, meta in nodes.items()
        }
    }


def binding_answer(error: str) -> dict[str, Any]:
    """ExtenderBindingResult: ``error`` empty when bound."""
    return {"Error": error}
