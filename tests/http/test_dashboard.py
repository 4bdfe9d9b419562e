"""The Grafana dashboard in deploy/ reads only series the app serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.main import create_app
from app.metrics import Metrics
from app.settings import Settings
from extenders.equivalence import EquivalenceCache
from extenders.equivalence.metrics import EquivalenceCollector

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "kube-gang-extender.json"
SERIES = re.compile(r"\b((?:extender|process|python)_[a-z_]+)\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",), "info": ("_info",)}


def served_series() -> set[str]:
    """Every series of the registry an app builds (nothing connects before its lifespan)."""
    names: set[str] = set()
    app = create_app(Settings(redis_url="redis://127.0.0.1:1/0", kube_mode="off"))
    for family in app.state.extender.metrics.registry.collect():
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def test_every_dashboard_query_names_a_served_series() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {name for expr in exprs for name in SERIES.findall(expr)}
    served = served_series()
    assert used, "no queries found"
    assert used <= served, f"not served: {sorted(used - served)}"
    # Every engine family is on the dashboard.
    engine = {f.name for f in Metrics().engine.registry.collect() if f.name.startswith("extender_")}
    engine |= {f.name for f in EquivalenceCollector(EquivalenceCache()).collect() if not f.name.endswith("_enabled")}
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in used}
    assert engine <= shown, f"not on the dashboard: {sorted(engine - shown)}"
