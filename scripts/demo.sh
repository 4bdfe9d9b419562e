#!/usr/bin/env bash
# Install, then show a gang scheduled through a real kube-scheduler with two extender replicas:
# placement, PodGroup status and Events (--json for one JSON object, --keep to leave it running).
# kube-apiserver and kube-scheduler come from KUBE_BIN_DIR (or PATH); etcd from PATH or KUBE_BIN_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${KUBE_BIN_DIR:-}" ] && [ -x ../shared/k8s/unpack ]; then
  ../shared/k8s/unpack .cache/kube-bin >/dev/null
  export KUBE_BIN_DIR="$PWD/.cache/kube-bin"
fi
scripts/bootstrap.sh --test >&2
exec .venv/bin/python -m devstack.demo "$@"
