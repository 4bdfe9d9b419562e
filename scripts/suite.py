"""The whole test suite as blocks run side by side: the tiers without a control plane in one pytest
process, and each tested release's share of the end-to-end tier in a process of its own.

The end-to-end tier mostly waits on its control plane, and a newer release cannot start before its
build ends: run one after another, the blocks left both cores half idle and the suite over its time
budget. The first block's output is shown as it runs; every other block's output is shown whole once
it ends (and once the first block has ended, so that outputs never interleave).

    python -m scripts.suite
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from devstack import releases
from devstack.releases import Release

REPO = Path(__file__).resolve().parents[1]
# pytest's "no tests were collected": a release block whose tests were all left out for want of
# binaries (outside CI), which the block's output says in one line.
NO_TESTS = 5


@dataclass
class Block:
    name: str
    argv: list[str]
    accepted: tuple[int, ...] = (0,)  # exit codes that count as passed
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    log: Path | None = None  # None: the block writes to the terminal
    started: float = 0.0
    seconds: float | None = None  # set when it ends
    shown: bool = False
    after: Block | None = None  # started once that block has ended (None: at once)

    @property
    def passed(self) -> bool:
        return self.process is not None and self.process.returncode in self.accepted


def last_to_end(chosen: list[Release]) -> Release | None:
    """The release whose block ends the suite while releases are being built: the last one built
    (builds go newest first, one at a time). None when none needs building."""
    pending = [r for r in chosen if releases.locate(r) is None]
    return min(pending, key=lambda r: r.order) if pending else None


def suite_blocks(python: str = sys.executable) -> list[Block]:
    """The non-end-to-end tiers, then one block per selected release (``KUBE_VERSIONS``, the tested
    table by default).

    While releases are being built, the builds stagger the blocks. With every release at hand, all
    blocks at once would run four control planes beside the other tiers, on a machine of two cores
    that starves servers of their start-up time: the whole tier's block and one other release's run
    at once, and each further release's block starts when the one before it ends.
    """
    pytest = [python, "-m", "pytest", "-q"]
    blocks = [Block("unit, HTTP, store and integration tiers", [*pytest, "tests", "--ignore=tests/e2e"])]
    chosen = releases.select(os.environ.get("KUBE_VERSIONS"))
    last = last_to_end(chosen)
    building = last is not None
    side: Block | None = None  # the latest block of a release outside the whole tier (nothing to build)
    for release in chosen:
        # No cache provider: several processes would overwrite each other's record of failures.
        argv = [*pytest, "-p", "no:cacheprovider", "tests/e2e", "--kube-release", release.version]
        if release == last:
            # It runs when nearly everything else has ended and the cores are half idle: over two
            # processes (pytest-xdist), each with a control plane of its own, a test module each.
            argv += ["-n", "2", "--dist", "loadfile"]
        block = Block(f"end-to-end tier on v{release.version}", argv, accepted=(0, NO_TESTS))
        if not building and not release.whole_tier:
            block.after, side = side, block
        blocks.append(block)
    return blocks


def _start(block: Block, log: Path | None) -> None:
    block.log = log
    block.started = time.monotonic()
    # A session of its own, so that stopping the suite stops the block's servers and builds too.
    if log is None:
        block.process = subprocess.Popen(block.argv, cwd=REPO, start_new_session=True)
        return
    with log.open("wb") as out:
        block.process = subprocess.Popen(
            block.argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _show(block: Block, stream: TextIO) -> None:
    code = block.process.returncode if block.process is not None else None
    verdict = "passed" if block.passed else f"FAILED (exit {code})"
    stream.write(f"\n== {block.name}: {verdict} in {block.seconds or 0:.0f} s\n")
    if block.log is not None:
        stream.write(block.log.read_text(errors="replace"))
    stream.flush()
    block.shown = True


def _stop(blocks: Sequence[Block]) -> None:
    running = [b.process for b in blocks if b.process is not None and b.process.poll() is None]
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in running:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def run(blocks: Sequence[Block], log_dir: Path, stream: TextIO = sys.stdout, poll: float = 0.5) -> bool:
    """Run every block, each at once or when the block it comes ``after`` has ended; True when all
    passed. The first block writes to the terminal."""
    first = True
    try:
        while not all(b.shown for b in blocks):
            for index, block in enumerate(blocks):
                if block.process is None and (block.after is None or block.after.seconds is not None):
                    _start(block, None if index == 0 else log_dir / f"block-{index}.log")
                    # Said before the first block's output begins; a block started later is named when shown.
                    if first and block.log is not None:
                        stream.write(f"started: {block.name} (output in {block.log})\n")
                        stream.flush()
            first = False
            for block in blocks:
                if block.process is not None and block.seconds is None and block.process.poll() is not None:
                    block.seconds = time.monotonic() - block.started
            if blocks[0].seconds is not None:
                for block in blocks:
                    if block.seconds is not None and not block.shown:
                        _show(block, stream)
            time.sleep(poll)
    except BaseException:
        _stop(blocks)
        raise
    stream.write("\n== summary\n")
    for block in blocks:
        stream.write(f"{'passed' if block.passed else 'FAILED'}  {block.seconds or 0:6.0f} s  {block.name}\n")
    stream.flush()
    return all(b.passed for b in blocks)


def main() -> int:
    # SIGTERM (CI cancelling the job) unwinds like Ctrl-C, so the blocks' sessions are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="suite-") as log_dir:
        return 0 if run(suite_blocks(), Path(log_dir)) else 1


if __name__ == "__main__":
    sys.exit(main())
