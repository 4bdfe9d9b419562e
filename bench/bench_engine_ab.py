"""Filter and prioritize of this tree's engine against another tree's, in one process, interleaved.

This VM's speed drifts by 15-30% within minutes, more than most engine changes move; timing both
engines on the same snapshot and candidates, alternating which goes first, cancels the drift. The
other tree's engine (``extenders/engine/``, or ``extenders/engine.py`` in older trees) is loaded
against this tree's plug-ins and snapshot, so only changes inside the engine are compared. Each
engine has its own equivalence cache (warm class; every call's candidates are first seen by both
engines untimed). Answers must be equal.

    python bench/bench_engine_ab.py OTHER_TREE [--nodes 5000] [--pods-per-node 20] [--candidates 500]
        [--iterations 3000] [--affinity] [--prefiltered] [--churn]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_filter import build, churned, incoming  # noqa: E402
from bench.bench_http_filter import stats  # noqa: E402
from extenders import engine  # noqa: E402
from extenders.equivalence import EquivalenceCache  # noqa: E402
from extenders.policy import default_policy  # noqa: E402


def load_engine(tree: Path) -> ModuleType:
    package = tree / "extenders" / "engine"
    if not package.is_dir():
        path = tree / "extenders" / "engine.py"
        spec = importlib.util.spec_from_file_location("engine_under_comparison", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        return module
    # The package's modules import one another as ``extenders.engine.*``: while it loads, those names
    # stand for the other tree's files; this tree's modules are put back afterwards.
    ours = {name: sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[:2] == ["extenders", "engine"]}
    try:
        path = package / "__init__.py"
        spec = importlib.util.spec_from_file_location(
            "extenders.engine", path, submodule_search_locations=[str(package)]
        )
        if spec is None or spec.loader is None:
            raise SystemExit(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        for name in [name for name in sys.modules if name.split(".")[:2] == ["extenders", "engine"]]:
            del sys.modules[name]
        sys.modules.update(ours)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("other", type=Path, help="the other tree (a git worktree)")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument(
        "--affinity",
        action="store_true",
        help="5%% of existing pods and the incoming pod carry a required anti-affinity term (as bench_filter)",
    )
    parser.add_argument(
        "--prefiltered",
        action="store_true",
        help="candidates drawn from the nodes the pod fits, as kube-scheduler sends them once its own filters ran",
    )
    parser.add_argument(
        "--churn",
        action="store_true",
        help="a new snapshot, one node rebuilt with one more pod, before every pair of calls (as when pods bind "
        "between two pods of a class): each engine's call is then timed on its first sight of the change",
    )
    args = parser.parse_args()
    engines: dict[str, Any] = {"this": engine, "other": load_engine(args.other)}
    policy = default_policy()
    snapshot = build(args.nodes, args.pods_per_node, args.affinity)
    snapshot.sealed = True
    pod = incoming(args.affinity)
    names = sorted(snapshot.nodes)
    if args.prefiltered:
        names = engine.filter_nodes(policy, pod, snapshot, names).passing
    rng = random.Random(2)
    caches = {name: EquivalenceCache() for name in engines}
    samples: dict[str, dict[str, list[float]]] = {name: {"filter": [], "prioritize": []} for name in engines}

    def run(name: str, candidates: list[str]) -> tuple[Any, Any, float, float]:
        module, cache = engines[name], caches[name]
        start = time.perf_counter()
        passed = module.filter_nodes(policy, pod, snapshot, candidates, cache.memo(pod, "filter"))
        middle = time.perf_counter()
        scores = module.prioritize_nodes(policy, pod, snapshot, candidates, cache.memo(pod, "prioritize"))
        end = time.perf_counter()
        return passed.passing, scores, (middle - start) * 1e3, (end - middle) * 1e3

    for iteration in range(args.iterations):
        candidates = rng.sample(names, min(args.candidates, len(names)))
        if args.churn:
            snapshot = churned(snapshot, rng.choice(names), iteration, args.affinity, rng)
        else:  # every call's candidates seen once by both engines, untimed
            first = [run(name, candidates)[:2] for name in engines]
            if first[0] != first[1]:
                raise SystemExit(f"the engines disagree at iteration {iteration}")
        order = list(engines) if iteration % 2 else list(reversed(engines))
        answers = {}
        for name in order:
            passing, scores, filter_ms, prioritize_ms = run(name, candidates)
            answers[name] = (passing, scores)
            samples[name]["filter"].append(filter_ms)
            samples[name]["prioritize"].append(prioritize_ms)
        if answers["this"] != answers["other"]:
            raise SystemExit(f"the engines disagree at iteration {iteration}")
    result = {
        "benchmark": "engine_ab",
        "nodes": args.nodes,
        "pods": args.nodes * args.pods_per_node,
        "candidates": args.candidates,
        "iterations": args.iterations,
        "affinity": args.affinity,
        "prefiltered": args.prefiltered,
        "churn": args.churn,
        "other_tree": str(args.other),
        "ms": {name: {verb: stats(values) for verb, values in by_verb.items()} for name, by_verb in samples.items()},
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
