#!/usr/bin/env bash
# Install and run one extender replica on 127.0.0.1:8888 (or the --host/--port you pass).
# With EXTENDER_REDIS_URL unset, the server starts a private redis-server and stops it on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/python -m app "$@"
