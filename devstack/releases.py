"""The Kubernetes releases the project is tested against, and where each one's binaries come from.

A release's kube-apiserver and kube-scheduler are taken from ``KUBE_BIN_DIR`` when the binaries
there report that version, else from ``.cache/kube/v<version>``, else built into it from the Go
module proxy by ``scripts/kube-build.sh``. etcd comes from ``KUBE_BIN_DIR`` or ``PATH`` for all.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "kube"
BUILD_SCRIPT = REPO / "scripts" / "kube-build.sh"
# Where Go lives when it was installed from the official tarball and is not on PATH.
GO_FALLBACK = Path("/usr/local/go/bin")


@dataclass(frozen=True)
class Release:
    version: str  # "1.37.2"
    whole_tier: bool = False  # every end-to-end test runs on it, not only the every-release ones

    @property
    def minor(self) -> int:
        return int(self.version.split(".")[1])

    @property
    def order(self) -> tuple[int, ...]:
        """The version as numbers, to sort releases oldest first."""
        return tuple(map(int, self.version.split(".")))


# Newest first. CI runs the whole end-to-end tier on the first and the tests marked
# ``every_release`` on all of them; the README's table of tested versions lists the same.
RELEASES = (Release("1.37.2", whole_tier=True), Release("1.34.4"), Release("1.28.7"))
NEWEST = RELEASES[0]


class ReleaseUnavailable(RuntimeError):
    """A release's binaries are neither at hand nor buildable here (the message says why)."""


def select(spec: str | None) -> list[Release]:
    """The releases named by ``spec`` ("1.37.2,1.28.7"), each running the whole tier; "all" or
    nothing: the tested releases, as the table says."""
    if not spec or spec.strip() == "all":
        return list(RELEASES)
    chosen = []
    for part in spec.split(","):
        version = part.strip().removeprefix("v")
        if not re.fullmatch(r"1\.\d+\.\d+", version):
            raise ValueError(f"not a Kubernetes version (MAJOR.MINOR.PATCH): {part!r}")
        chosen.append(Release(version, whole_tier=True))
    return chosen


def only(chosen: list[Release], version: str | None) -> list[Release]:
    """The one release of ``chosen`` that is ``version`` (all of them when None), keeping its share
    of the tier: a suite split into one process per release runs each with this."""
    if version is None:
        return chosen
    kept = [r for r in chosen if r.version == version.strip().removeprefix("v")]
    if not kept:
        names = ", ".join(r.version for r in chosen)
        raise ValueError(f"release {version} is not among the selected releases ({names})")
    return kept


@functools.cache
def binary_version(path: str) -> str | None:
    """The version a kube binary reports (``--version`` prints "Kubernetes v1.28.7")."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    found = re.search(r"v(\d+\.\d+\.\d+)", done.stdout)
    return found.group(1) if found else None


def _complete(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in ("kube-apiserver", "kube-scheduler"))


def _go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    candidate = GO_FALLBACK / "go"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def locate(release: Release) -> Path | None:
    """A directory holding the release's two binaries, if one exists without building."""
    bin_dir = Path(os.environ.get("KUBE_BIN_DIR") or "/nonexistent")
    if _complete(bin_dir) and binary_version(str(bin_dir / "kube-scheduler")) == release.version:
        return bin_dir
    cached = CACHE / f"v{release.version}"
    return cached if _complete(cached) else None


def why_unavailable(release: Release) -> str | None:
    """None when the release's binaries are at hand or can be built, else what is missing."""
    if locate(release) is not None or _go() is not None:
        return None
    return (
        f"kube-apiserver/kube-scheduler v{release.version} are not in KUBE_BIN_DIR or {CACHE}, "
        "and Go is not installed to build them (scripts/kube-build.sh)"
    )


# Builds that failed in this process, by version: the error, so a second caller does not build again.
_failed: dict[str, str] = {}


def binaries(release: Release, background: bool = False) -> Path:
    """The release's binary directory, built (minutes, once) when nothing holds it yet;
    ``background``: at the lowest CPU priority, beside other work."""
    found = locate(release)
    if found is not None:
        return found
    if release.version in _failed:
        raise ReleaseUnavailable(_failed[release.version])
    go = _go()
    if go is None:
        raise ReleaseUnavailable(why_unavailable(release) or "")
    env = {**os.environ, "PATH": f"{Path(go).parent}:{os.environ.get('PATH', '')}"}
    command = [str(BUILD_SCRIPT), release.version]
    if background and shutil.which("nice"):
        command = ["nice", "-n", "19", *command]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=3600)
    if done.returncode != 0:
        _failed[release.version] = f"building v{release.version} failed:\n{done.stderr[-4000:]}"
        raise ReleaseUnavailable(_failed[release.version])
    return Path(done.stdout.strip().splitlines()[-1]).resolve()


def build_missing() -> None:
    """Build the tested releases nothing holds yet, newest first: the newest runs the whole
    end-to-end tier, the longest block of the suite, so its build is the one the suite waits on."""
    for release in sorted(RELEASES, key=lambda r: r.order, reverse=True):
        if locate(release) is None and _go() is not None:
            try:
                print(binaries(release, background=True), flush=True)
            except ReleaseUnavailable as exc:  # the tier's own build says so again, in the test run
                print(exc, file=sys.stderr, flush=True)


if __name__ == "__main__":
    # ``python3 -m devstack.releases --build-missing``: scripts/test.sh starts the builds before the
    # virtualenv exists, so this module needs nothing beyond the standard library.
    if sys.argv[1:] != ["--build-missing"]:
        sys.exit("usage: python3 -m devstack.releases --build-missing")
    build_missing()
