"""The whole suite's runner: blocks side by side, every failure reported, nothing left running."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from devstack import releases
from devstack.releases import RELEASES
from scripts import suite
from scripts.suite import Block
from tests.plugins import e2e_tier


def script(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def meet(mine: Path, theirs: Path) -> str:
    """A block that passes only when the other block runs at the same time."""
    return (
        "import pathlib, sys, time\n"
        f"pathlib.Path({str(mine)!r}).touch()\n"
        "deadline = time.monotonic() + 20\n"
        f"while not pathlib.Path({str(theirs)!r}).exists():\n"
        "    if time.monotonic() > deadline: sys.exit('the other block never ran')\n"
        "    time.sleep(0.05)\n"
        "print('met')\n"
    )


def test_blocks_run_at_the_same_time_and_each_output_is_shown(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    blocks = [Block("first", script(meet(a, b))), Block("second", script(meet(b, a)))]
    out = io.StringIO()
    assert suite.run(blocks, tmp_path, out, poll=0.05)
    text = out.getvalue()
    assert "== second: passed" in text and "met" in text
    assert "passed" in text.split("== summary", 1)[1]


def test_a_failing_block_fails_the_suite_and_its_output_is_shown_even_when_the_first_passed(tmp_path: Path) -> None:
    blocks = [
        Block("first", script("print('fine')")),
        Block("second", script("print('the reason it broke'); raise SystemExit(3)")),
        Block("third", script("raise SystemExit(5)"), accepted=(0, 5)),
    ]
    out = io.StringIO()
    assert not suite.run(blocks, tmp_path, out, poll=0.05)
    text = out.getvalue()
    assert "== second: FAILED (exit 3)" in text and "the reason it broke" in text
    assert "== third: passed" in text
    summary = text.split("== summary", 1)[1]
    assert "FAILED" in summary.splitlines()[2] and "second" in summary.splitlines()[2]


def test_a_block_ending_first_is_shown_only_after_the_terminal_block(tmp_path: Path) -> None:
    blocks = [Block("slow", script("import time; time.sleep(1)")), Block("quick", script("print('early')"))]
    out = io.StringIO()
    assert suite.run(blocks, tmp_path, out, poll=0.05)
    text = out.getvalue()
    assert text.index("== slow: passed") < text.index("== quick: passed") < text.index("early")


class InterruptedOnceStarted(io.StringIO):
    """A terminal at which Ctrl-C is pressed once the first block has started its child."""

    def __init__(self, pid_file: Path) -> None:
        super().__init__()
        self.pid_file = pid_file

    def write(self, text: str) -> int:
        deadline = time.monotonic() + 20
        while not (self.pid_file.exists() and self.pid_file.read_text()):
            assert time.monotonic() < deadline, "the block never started its child"
            time.sleep(0.05)
        raise KeyboardInterrupt


def gone(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "zombie" in status.read_text()
    except FileNotFoundError:
        return True


def test_stopping_the_suite_stops_every_block_and_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    spawn = (
        "import pathlib, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(pid_file)!r}).write_text(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    blocks = [Block("first", script(spawn)), Block("second", script("import time; time.sleep(60)"))]
    with pytest.raises(KeyboardInterrupt):
        suite.run(blocks, tmp_path, InterruptedOnceStarted(pid_file), poll=0.05)
    for block in blocks:
        assert block.process is not None and block.process.poll() is not None
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while not gone(child):
        assert time.monotonic() < deadline, "the block's child outlived the suite"
        time.sleep(0.05)


def test_the_suite_is_the_other_tiers_and_one_block_per_selected_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBE_VERSIONS", raising=False)
    monkeypatch.setattr(releases, "locate", lambda r: Path("/bin"))
    blocks = suite.suite_blocks("py")
    assert blocks[0].argv == ["py", "-m", "pytest", "-q", "tests", "--ignore=tests/e2e"]
    assert [b.argv[b.argv.index("--kube-release") + 1] for b in blocks[1:]] == [r.version for r in RELEASES]
    assert all(b.argv[4:7] == ["-p", "no:cacheprovider", "tests/e2e"] for b in blocks[1:])
    monkeypatch.setenv("KUBE_VERSIONS", "1.30.1")
    (only,) = suite.suite_blocks("py")[1:]
    assert only.argv[only.argv.index("--kube-release") + 1] == "1.30.1"


def workers(block: Block) -> int:
    return int(block.argv[block.argv.index("-n") + 1]) if "-n" in block.argv else 1


def test_with_every_release_at_hand_the_blocks_beside_the_whole_tier_run_one_after_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBE_VERSIONS", raising=False)
    monkeypatch.setattr(releases, "locate", lambda r: Path("/bin"))
    _, whole, middle, oldest = suite.suite_blocks("py")
    assert [workers(b) for b in (whole, middle, oldest)] == [1, 1, 1]
    assert whole.after is None and middle.after is None
    assert oldest.after is middle
    # While releases are built, the builds stagger the blocks: all start at once.
    monkeypatch.setattr(releases, "locate", lambda r: None)
    assert all(b.after is None for b in suite.suite_blocks("py"))


def test_a_block_after_another_starts_only_once_that_one_has_ended(tmp_path: Path) -> None:
    mark = tmp_path / "first-done"
    first = Block("first", script(f"import pathlib, time; time.sleep(0.5); pathlib.Path({str(mark)!r}).touch()"))
    # Fails unless the block it comes after has already finished.
    then = Block("then", script(f"import pathlib, sys; sys.exit(0 if pathlib.Path({str(mark)!r}).exists() else 1)"))
    then.after = first
    out = io.StringIO()
    assert suite.run([Block("terminal", script("print('t')")), first, then], tmp_path, out, poll=0.05)
    assert then.started >= first.started + (first.seconds or 0)
    assert "== then: passed" in out.getvalue()


def test_the_block_that_ends_the_suite_runs_over_two_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBE_VERSIONS", raising=False)
    _, middle, oldest = RELEASES
    # The oldest at hand (KUBE_BIN_DIR), the others built newest first: the middle one ends last.
    monkeypatch.setattr(releases, "locate", lambda r: Path("/bin") if r is oldest else None)
    assert suite.last_to_end(list(RELEASES)) is middle
    assert [workers(b) for b in suite.suite_blocks("py")[1:]] == [1, 2, 1]
    assert "loadfile" in suite.suite_blocks("py")[2].argv
    monkeypatch.setattr(releases, "locate", lambda r: None)
    assert suite.last_to_end(list(RELEASES)) is oldest


def test_the_summary_lines_of_xdist_workers_reach_the_controller_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e2e_tier, "_builds", e2e_tier.Builds())
    monkeypatch.setattr(e2e_tier, "_skipped", [])
    monkeypatch.setattr(e2e_tier, "_reported", [])
    outputs = []
    for built, figure in (("built v1.34.4 in 1717 s", "a"), ("built v1.34.4 in 1718 s", "b")):
        e2e_tier._builds.log[:] = [built]
        e2e_tier._reported[:] = ["shared line", f"figure {figure}"]
        session = SimpleNamespace(config=SimpleNamespace(workeroutput={}))
        e2e_tier.pytest_sessionfinish(session)  # type: ignore[arg-type]
        outputs.append(SimpleNamespace(workeroutput=session.config.workeroutput))
    # The controller starts with nothing of its own.
    e2e_tier._builds.log.clear()
    e2e_tier._reported.clear()
    for node in outputs:
        e2e_tier.pytest_testnodedown(node, None)

    assert e2e_tier._builds.log == ["built v1.34.4 in 1717 s"]
    assert e2e_tier._reported == ["shared line", "figure a", "figure b"]


def test_the_since_marker_takes_one_major_minor_and_says_so_otherwise() -> None:
    assert e2e_tier.since_order(("1.30",)) == (1, 30)
    for bad in (("1.30.1",), ("v1.30",), (1.3,), ("1.30", "1.31"), ()):
        with pytest.raises(pytest.UsageError, match="since marker takes one release"):
            e2e_tier.since_order(bad)
