"""Where the captured kube-scheduler request bodies live: a vendored copy, so every checkout runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WIRE_DIR = Path(__file__).resolve().parent / "data" / "wire"


def capture_paths() -> list[Path]:
    """Every capture file, sorted; raises rather than let an empty list quietly parametrize nothing."""
    paths = sorted(WIRE_DIR.glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no kube-scheduler captures in {WIRE_DIR}")
    return paths


def load_capture(name: str) -> dict[str, Any]:
    """One capture by file name, parsed; every capture is a JSON object."""
    data = json.loads((WIRE_DIR / name).read_bytes())
    if not isinstance(data, dict):
        raise TypeError(f"{name} is not a JSON object")
    return data
