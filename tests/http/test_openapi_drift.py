"""openapi/openapi.json must equal what the app serves (regenerate: python scripts/export_openapi.py)."""

from __future__ import annotations

import json
from pathlib import Path

from devstack import http_client
from scripts.export_openapi import TARGET, render
from tests.plugins.servers import ServerProcess


def test_exported_document_matches_the_app() -> None:
    assert TARGET.is_file(), "openapi/openapi.json is missing: run python scripts/export_openapi.py"
    assert json.loads(TARGET.read_text()) == json.loads(render()), (
        "openapi/openapi.json drifted from the app: run python scripts/export_openapi.py"
    )


def test_served_document_matches_the_export(server: ServerProcess) -> None:
    served = http_client.get(f"{server.url}/openapi.json", timeout=5).json()
    assert served == json.loads(Path(TARGET).read_text())
    for path in ("/filter", "/prioritize", "/preempt", "/bind", "/v1/explain", "/v1/nodes", "/readyz"):
        assert path in served["paths"]
