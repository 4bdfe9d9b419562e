#!/usr/bin/env bash
# Install everything and run the whole suite: lint, types, OpenAPI drift, unit and integration tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
echo "== ruff" && .venv/bin/ruff check app extenders tests bench scripts && .venv/bin/ruff format --check app extenders tests bench scripts
echo "== mypy" && .venv/bin/mypy app extenders
echo "== pytest" && .venv/bin/python -m pytest -q "$@"
