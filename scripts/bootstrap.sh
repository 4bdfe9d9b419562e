#!/usr/bin/env bash
# Make this checkout runnable: a virtualenv with the package and its dev extras, and the servers the
# project runs beside it, from Debian's packages when missing: redis-server always, and etcd and
# docker-compose with --test (the end-to-end tier starts its own etcd; kube-apiserver and
# kube-scheduler come from KUBE_BIN_DIR, see the README). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Reinstalled when pyproject.toml or requirements.lock change; the lock's exact pins (scripts/lock.sh)
# constrain every package, the build backend's included.
stamp=.venv/.installed-$(cat pyproject.toml requirements.lock | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
  PIP_CONSTRAINT="$PWD/requirements.lock" .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
  rm -f .venv/.installed-* && touch "$stamp"
fi

packages=()
if [ -z "${EXTENDER_REDIS_URL:-}" ] && [ -z "${REDIS_URL:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  packages+=(redis-server)
fi
if [ "${1:-}" = "--test" ] && ! command -v etcd >/dev/null 2>&1 && [ ! -x "${KUBE_BIN_DIR:-/nonexistent}/etcd" ]; then
  packages+=(etcd-server)
fi
# tests/test_compose.py validates docker-compose.yml against compose's own schema.
if [ "${1:-}" = "--test" ] && ! command -v docker-compose >/dev/null 2>&1; then
  packages+=(docker-compose)
fi
if [ ${#packages[@]} -gt 0 ]; then
  echo "installing Debian packages: ${packages[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
  # The packages start system services on their default ports; we run our own servers.
  for service in redis-server etcd; do
    $SUDO service "$service" stop >/dev/null 2>&1 || true
  done
fi
