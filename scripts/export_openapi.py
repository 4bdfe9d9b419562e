"""Write the OpenAPI document the app serves to openapi/openapi.json (run after changing routes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from app.main import create_app
from app.settings import Settings

TARGET = Path(__file__).resolve().parents[1] / "openapi" / "openapi.json"


def render() -> str:
    app = create_app(Settings(redis_url="redis://unused"))
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(render())
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
