#!/usr/bin/env bash
# Run docker-compose.yml where no image registry is reachable: build a local stand-in for every image
# the stack and the Dockerfile pull, under the very names they use, then run the stack with its test
# runner and tear it down. Exit status: the test runner's.
#
#   scripts/compose-standin.sh            build the missing stand-ins, run the stack, tear it down
#   scripts/compose-standin.sh --images   only build the stand-ins
#   STANDIN_REBUILD=1 scripts/compose-standin.sh   rebuild the stand-ins even when present
#
# The stand-ins come from a Debian bookworm base made with debootstrap (cached under
# .cache/compose-standin/) and Debian's packages (python3, redis-server, etcd, nginx), and from the
# kube-apiserver and kube-scheduler binaries in KUBE_BIN_DIR, which go into images with no shell, like
# the official distroless ones. An image of one of these names that is not a stand-in (a pulled one)
# is never replaced. Needs dockerd, debootstrap and root (or sudo) for debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

# The names docker-compose.yml and the Dockerfile use (tests/test_compose.py keeps them in step).
PYTHON_IMAGE=python:3.11-slim
REDIS_IMAGE=redis:7
ETCD_IMAGE=registry.k8s.io/etcd:3.5.10-0
APISERVER_IMAGE=registry.k8s.io/kube-apiserver:v1.28.7
SCHEDULER_IMAGE=registry.k8s.io/kube-scheduler:v1.28.7
NGINX_IMAGE=nginx:1.27-alpine
BASE_IMAGE=kube-gang-extender-standin/debian:bookworm
LABEL=kube-gang-extender.standin

CACHE=.cache/compose-standin
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ROOTFS_TAR=$CACHE/debian-bookworm-minbase.tar
PROJECT=${COMPOSE_PROJECT_NAME:-kube-gang-extender-standin}
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

started=$(date +%s)
say() { echo "== [$(($(date +%s) - started))s] $*" >&2; }

docker info >/dev/null 2>&1 || { echo "docker is not answering: start dockerd first" >&2; exit 1; }

is_standin() { [ "$(docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null)" = "true" ]; }

# wanted IMAGE: true when IMAGE should be built now (missing, or a stand-in and STANDIN_REBUILD=1).
wanted() {
  if ! docker image inspect "$1" >/dev/null 2>&1; then
    return 0
  fi
  if ! is_standin "$1"; then
    say "$1: a real image is present, kept"
    return 1
  fi
  [ "${STANDIN_REBUILD:-0}" = "1" ]
}

build_base() {
  if [ ! -s "$ROOTFS_TAR" ]; then
    command -v debootstrap >/dev/null || { echo "debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
    say "debootstrap bookworm from $MIRROR (once; cached in $ROOTFS_TAR)"
    mkdir -p "$CACHE"
    rootfs=$(mktemp -d)
    $SUDO debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    $SUDO tar --numeric-owner -C "$rootfs" -cf "$ROOTFS_TAR.tmp" .
    $SUDO rm -rf "$rootfs"
    mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
  fi
  if wanted "$BASE_IMAGE"; then
    say "importing $BASE_IMAGE"
    docker import --change "LABEL $LABEL=true" --change 'CMD ["bash"]' \
      --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8" \
      "$ROOTFS_TAR" "$BASE_IMAGE" >/dev/null
    # Certificate authorities this machine adds to Debian's (an intercepting proxy's, say) are trusted
    # in the stand-ins too: the images' builds fetch Python packages over the same network. Debian's
    # ca-certificates, where a stand-in installs it, takes them in.
    local extra_cas=(/usr/local/share/ca-certificates/*.crt) context
    if [ -e "${extra_cas[0]}" ]; then
      context=$(mktemp -d)
      cp "${extra_cas[@]}" "$context/"
      printf 'FROM %s\nCOPY *.crt /usr/local/share/ca-certificates/\n' "$BASE_IMAGE" | build "$BASE_IMAGE" "$context"
      rm -rf "$context"
    fi
  fi
}

# build IMAGE CONTEXT: a stand-in from the Dockerfile on stdin.
build() {
  local image=$1 context=$2
  say "building stand-in $image"
  local out
  # Its output only when it fails (the legacy builder's notice otherwise fills the log).
  if ! out=$(docker build -q --label "$LABEL=true" -t "$image" -f - "$context" 2>&1); then
    echo "$out" >&2
    exit 1
  fi
}

# apt_image IMAGE PACKAGES EXTRA-COMMAND CMD: the base with Debian's PACKAGES.
apt_image() {
  local image=$1 packages=$2 extra=$3 cmd=$4 context run
  wanted "$image" || return 0
  run="apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages"
  run="$run >/dev/null && rm -rf /var/lib/apt/lists/*${extra:+ && $extra}"
  context=$(mktemp -d)
  build "$image" "$context" <<EOF
FROM $BASE_IMAGE
RUN $run
CMD $cmd
EOF
  rm -rf "$context"
}

kube_binaries() {
  if [ -z "${KUBE_BIN_DIR:-}" ] && [ -x ../shared/k8s/unpack ]; then
    ../shared/k8s/unpack .cache/kube-bin >/dev/null
    KUBE_BIN_DIR="$PWD/.cache/kube-bin"
  fi
  for binary in kube-apiserver kube-scheduler; do
    [ -x "${KUBE_BIN_DIR:-/nonexistent}/$binary" ] \
      || { echo "$binary not found: set KUBE_BIN_DIR to a directory with kube-apiserver and kube-scheduler v1.28" >&2; exit 1; }
  done
}

# A control-plane image as the official ones are: the static binary under /usr/local/bin, /tmp,
# root and nobody in /etc/passwd, and no shell.
kube_image() {
  local image=$1 binary=$2 context
  wanted "$image" || return 0
  context=$(mktemp -d)
  cp "$KUBE_BIN_DIR/$binary" "$context/$binary"
  build "$image" "$context" <<EOF
FROM $BASE_IMAGE AS files
RUN mkdir -p /out/etc /out/tmp && chmod 1777 /out/tmp \\
    && grep -E '^(root|nobody):' /etc/passwd > /out/etc/passwd && grep -E '^(root|nogroup):' /etc/group > /out/etc/group
FROM scratch
COPY --from=files /out/ /
COPY $binary /usr/local/bin/$binary
ENV PATH=/usr/local/bin:/usr/bin:/bin
EOF
  rm -rf "$context"
}

build_images() {
  build_base
  apt_image "$PYTHON_IMAGE" "python3 python3-venv python3-pip ca-certificates" \
    "ln -s /usr/bin/python3 /usr/local/bin/python && ln -s /usr/bin/python3 /usr/local/bin/python3 && ln -s /usr/bin/pip3 /usr/local/bin/pip" \
    '["python3"]'
  apt_image "$REDIS_IMAGE" "redis-server" "" '["redis-server"]'
  apt_image "$ETCD_IMAGE" "etcd-server etcd-client" \
    "ln -s /usr/bin/etcd /usr/local/bin/etcd && ln -s /usr/bin/etcdctl /usr/local/bin/etcdctl" '["/usr/local/bin/etcd"]'
  apt_image "$NGINX_IMAGE" "nginx-light wget" "" '["nginx", "-g", "daemon off;"]'
  if wanted "$APISERVER_IMAGE" || wanted "$SCHEDULER_IMAGE"; then
    kube_binaries
  fi
  kube_image "$APISERVER_IMAGE" kube-apiserver
  kube_image "$SCHEDULER_IMAGE" kube-scheduler
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# When each container of the run started (its dependencies were healthy by then) and when the test
# runner exited, in seconds from the first start.
timeline() {
  local ids
  ids=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
  [ -n "$ids" ] || return 0
  # shellcheck disable=SC2086
  docker inspect $ids | python3 -c '
import datetime, json, re, sys

def when(stamp):
    stamp = re.sub(r"(\.\d{6})\d*", r"\1", stamp)
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

rows = sorted(
    (when(c["State"]["StartedAt"]), c["Config"]["Labels"]["com.docker.compose.service"], c["State"])
    for c in json.load(sys.stdin)
)
t0 = rows[0][0]
for started, service, state in rows:
    line = f"  {service:16} started +{started - t0:5.1f}s"
    if service == "tests" and not state["FinishedAt"].startswith("0001"):
        finished, code = when(state["FinishedAt"]) - t0, state["ExitCode"]
        line += f", exited +{finished:5.1f}s with {code}"
    print(line)
' >&2
}

run_stack() {
  local compose rc
  if docker compose version >/dev/null 2>&1; then
    compose=(docker compose)
  else
    compose=(docker-compose)
  fi
  compose+=(-p "$PROJECT" -f docker-compose.yml)
  # The balancer's published port: a free one, so that a replica already on 8888 does not collide.
  COMPOSE_EXTENDER_PORT=${COMPOSE_EXTENDER_PORT:-$(free_port)}
  export COMPOSE_EXTENDER_PORT
  trap '"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true' EXIT
  say "${compose[*]} up --build --exit-code-from tests"
  set +e
  "${compose[@]}" up --build --exit-code-from tests
  rc=$?
  set -e
  say "test runner exited with $rc; timeline of the run:"
  timeline || true
  say "tearing down"
  "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
  trap - EXIT
  return "$rc"
}

sizes() {
  say "image sizes"
  for image in "$PYTHON_IMAGE" "$REDIS_IMAGE" "$ETCD_IMAGE" "$APISERVER_IMAGE" "$SCHEDULER_IMAGE" "$NGINX_IMAGE" \
    kube-gang-extender:local kube-gang-extender-tests:local; do
    docker image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' "$image" >&2
  done
}

build_images
say "stand-ins ready"
if [ "${1:-}" = "--images" ]; then
  exit 0
fi
status=0
run_stack || status=$?
sizes
say "done: exit $status"
exit "$status"
