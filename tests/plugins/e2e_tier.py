"""The end-to-end tier without its binaries: a release's tests are left out with one line saying
what is missing.

With ``EXTENDER_E2E=required`` (CI) nothing is left out: the tier's control-plane fixture fails.
"""

from __future__ import annotations

import os
import time

import pytest

from devstack import releases
from devstack.controlplane import find_binaries
from devstack.releases import Release

_skipped: list[str] = []
_reported: list[str] = []


def report(line: str) -> None:
    """A line for the end of the run's output (figures a test measured, such as compared verdicts)."""
    _reported.append(line)


def missing_message(release: Release) -> str | None:
    """None when ``release`` can run here, else what is missing."""
    unavailable = releases.why_unavailable(release)
    if unavailable is not None:
        return f"{unavailable} (see README, End-to-end tests)"
    # etcd is the one binary no release brings: find_binaries without a release only looks.
    if "etcd" in find_binaries()[1]:
        where = f"KUBE_BIN_DIR={os.environ['KUBE_BIN_DIR']}" if os.environ.get("KUBE_BIN_DIR") else "PATH"
        return f"etcd not found in {where} (see README, End-to-end tests)"
    return None


def item_release(item: pytest.Item) -> Release | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("kube_release") if callspec is not None else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("EXTENDER_E2E") == "required":
        return
    left_out: dict[str, list[pytest.Item]] = {}
    for item in items:
        release = item_release(item) if item.get_closest_marker("e2e") is not None else None
        message = missing_message(release) if release is not None else None
        if message is not None:
            left_out.setdefault(message, []).append(item)
    if not left_out:
        return
    dropped = {id(item) for group in left_out.values() for item in group}
    config.hook.pytest_deselected(items=[item for item in items if id(item) in dropped])
    items[:] = [item for item in items if id(item) not in dropped]
    for message, group in left_out.items():
        _skipped.append(f"end-to-end tier skipped ({len(group)} tests): {message}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the releases the selected tests need and nothing holds yet, before any test runs: a
    build takes minutes, more than a test's timeout."""
    needed = {release.version: release for item in session.items if (release := item_release(item)) is not None}
    for release in needed.values():
        if releases.locate(release) is not None or releases.why_unavailable(release) is not None:
            continue
        writer = session.config.get_terminal_writer()
        writer.line(f"building kube-apiserver and kube-scheduler v{release.version} (scripts/kube-build.sh, once) ...")
        started = time.monotonic()
        try:
            where = releases.binaries(release)
        except releases.ReleaseUnavailable as exc:
            writer.line(str(exc), red=True)  # the release's tests fail with it
            continue
        writer.line(f"built v{release.version} into {where} in {time.monotonic() - started:.0f} s")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _skipped:
        terminalreporter.write_line(line, yellow=True)
    for line in _reported:
        terminalreporter.write_line(line)
