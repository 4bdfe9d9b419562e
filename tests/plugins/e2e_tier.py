"""The end-to-end tier's releases: built while the other tiers run, and left out with one line
saying what is missing when they cannot be had.

The end-to-end tests run after every other test, so the releases nothing holds yet are built in the
background meanwhile (scripts/kube-build.sh at low priority, minutes each with a cold Go cache); a
test of a release still building waits for it before its timeout starts. With
``EXTENDER_E2E=required`` (CI) nothing is left out: the tier's control-plane fixture fails.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Generator
from typing import Any

import pytest
from _pytest._io import TerminalWriter

from devstack import releases
from devstack.controlplane import find_binaries
from devstack.releases import Release

_skipped: list[str] = []
_reported: list[str] = []


def report(line: str) -> None:
    """A line for the end of the run's output (figures a test measured, such as compared verdicts)."""
    _reported.append(line)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kube-release",
        metavar="VERSION",
        help="run only this release's share of the end-to-end tier (one of the selected releases)",
    )


def pytest_configure(config: pytest.Config) -> None:
    try:
        selected(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def selected(config: pytest.Config) -> list[Release]:
    """The releases this run tests: ``KUBE_VERSIONS`` (the tested table by default), narrowed to
    ``--kube-release``."""
    return releases.only(releases.select(os.environ.get("KUBE_VERSIONS")), config.getoption("kube_release"))


def since_order(args: tuple[object, ...]) -> tuple[int, int]:
    """The (major, minor) a ``since`` marker names; a clear error for anything but one "MAJOR.MINOR"."""
    text = args[0] if len(args) == 1 and isinstance(args[0], str) else ""  # a float 1.30 would read as 1.3
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise pytest.UsageError(f'the since marker takes one release as "MAJOR.MINOR" (since("1.30")), not {args!r}')
    return int(major), int(minor)


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


def _release_order(item: pytest.Item) -> tuple[int, ...]:
    release = item_release(item)
    return release.order if release is not None else ()


def item_release(item: pytest.Item) -> Release | None:
    callspec = getattr(item, "callspec", None)
    release = callspec.params.get("kube_release") if callspec is not None else None
    # A test meant for none of the selected releases has an empty parameter set (a placeholder).
    return release if isinstance(release, Release) else None


def _for_no_release(item: pytest.Item) -> bool:
    return "kube_release" in getattr(item, "fixturenames", ()) and item_release(item) is None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under --kube-release, the tests of the whole tier are for no release on an older one: left out.
    unmeant = [i for i in items if _for_no_release(i)]
    if unmeant:
        config.hook.pytest_deselected(items=unmeant)
        items[:] = [i for i in items if not _for_no_release(i)]
    # The end-to-end tests after all others, one release after another in their order: the releases
    # they need are built meanwhile.
    e2e = [i for i in items if i.get_closest_marker("e2e") is not None]
    # Oldest release first: the one most likely at hand runs while newer ones may still be building.
    e2e.sort(key=_release_order)
    items[:] = [i for i in items if i.get_closest_marker("e2e") is None] + e2e
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


class Builds:
    """The releases being built in the background, in the order the tests need them."""

    def __init__(self) -> None:
        self.done: dict[str, threading.Event] = {}
        self.log: list[str] = []

    def start(self, needed: list[Release]) -> None:
        pending = [r for r in needed if releases.locate(r) is None and releases.why_unavailable(r) is None]
        for release in pending:
            self.done[release.version] = threading.Event()
        if pending:
            threading.Thread(target=self._run, args=(pending,), name="kube-build", daemon=True).start()

    def _run(self, pending: list[Release]) -> None:
        for release in pending:
            started = time.monotonic()
            try:
                where = releases.binaries(release, background=True)
                self.log.append(f"built v{release.version} into {where} in {time.monotonic() - started:.0f} s")
            except releases.ReleaseUnavailable as exc:  # the release's tests fail with it
                self.log.append(str(exc))
            finally:
                self.done[release.version].set()

    def wait(self, release: Release, writer: TerminalWriter) -> None:
        done = self.done.get(release.version)
        if done is None or done.is_set():
            return
        started = time.monotonic()
        writer.line(f"\nwaiting for kube-apiserver and kube-scheduler v{release.version} to be built ...")
        done.wait()
        writer.line(f"waited {time.monotonic() - started:.0f} s: {self.log[-1] if self.log else ''}")


_builds = Builds()


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    needed: dict[str, Release] = {}
    for item in session.items:
        release = item_release(item) if item.get_closest_marker("e2e") is not None else None
        if release is not None:
            needed.setdefault(release.version, release)
    _builds.start(list(needed.values()))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    """Before the test's timeout starts (pytest-timeout's wrapper is inside this one): its release built."""
    release = item_release(item)
    if release is not None:
        _builds.wait(release, item.config.get_terminal_writer())
    yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A pytest-xdist worker prints no summary: its lines go to the controller, which prints them.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["e2e_tier"] = {"builds": list(_builds.log), "skipped": list(_skipped), "reported": list(_reported)}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: a worker ended, with its summary lines (each kept once; the builds
    every worker waited for, as the first worker to end saw them)."""
    lines = getattr(node, "workeroutput", {}).get("e2e_tier", {})
    if not _builds.log:
        _builds.log.extend(lines.get("builds", []))
    for kept, theirs in ((_skipped, "skipped"), (_reported, "reported")):
        kept.extend(line for line in lines.get(theirs, []) if line not in kept)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _builds.log:
        terminalreporter.write_line(line)
    for line in _skipped:
        terminalreporter.write_line(line, yellow=True)
    for line in _reported:
        terminalreporter.write_line(line)
