#!/usr/bin/env bash
# Install everything and run the whole suite: lint, types, OpenAPI drift, unit, integration and the
# end-to-end tier against a real kube-apiserver and kube-scheduler (skipped, with one line saying
# what is missing, when their binaries are not in KUBE_BIN_DIR or on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
# The whole suite builds the newer releases' control planes it lacks (minutes each, one at a time):
# started first, at the lowest priority, beside the install and checks; each release's end-to-end
# block waits for its own. In a session of their own, so that a run stopping early stops them too.
if [ $# -eq 0 ]; then
  mkdir -p .cache/kube
  setsid python3 -m devstack.releases --build-missing >.cache/kube/build.log 2>&1 &
  builds=$!
  trap 'kill -- "-$builds" 2>/dev/null || true' EXIT
fi
scripts/bootstrap.sh --test
# One command per line: under set -e a failure inside an && list (but its last) would not stop the script.
echo "== ruff"
.venv/bin/ruff check app extenders devstack tests bench scripts
.venv/bin/ruff format --check app extenders devstack tests bench scripts
echo "== mypy"
.venv/bin/mypy app extenders devstack tests bench scripts
echo "== pytest"
if [ $# -eq 0 ]; then
  # The whole suite: the other tiers and each release's end-to-end block side by side (scripts/suite.py).
  .venv/bin/python -m scripts.suite
else
  .venv/bin/python -m pytest -q "$@"
fi
