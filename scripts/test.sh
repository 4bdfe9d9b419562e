#!/usr/bin/env bash
# Install everything and run the whole suite: lint, types, OpenAPI drift, unit, integration and the
# end-to-end tier against a real kube-apiserver and kube-scheduler (skipped, with one line saying
# what is missing, when their binaries are not in KUBE_BIN_DIR or on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --test
# One command per line: under set -e a failure inside an && list (but its last) would not stop the script.
echo "== ruff"
.venv/bin/ruff check app extenders devstack tests bench scripts
.venv/bin/ruff format --check app extenders devstack tests bench scripts
echo "== mypy"
.venv/bin/mypy app extenders devstack tests bench scripts
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
