#!/usr/bin/env bash
# Make this checkout runnable: a virtualenv with the package and its dev extras, and a
# redis-server binary (Debian's package, installed when missing). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
  rm -f .venv/.installed-* && touch "$stamp"
fi

if [ -z "${EXTENDER_REDIS_URL:-}" ] && [ -z "${REDIS_URL:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found: installing Debian's redis-server package" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # The package starts a system service on 6379; we run our own servers, so stop it.
  $SUDO service redis-server stop >/dev/null 2>&1 || true
fi
