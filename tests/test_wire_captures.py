"""The vendored kube-scheduler captures are complete, parse, and match the shared originals when those exist.

The shared copy (``<repo>/../shared/wire``) is absent on clean checkouts such as CI; the vendored one is
what the wire tests read, so it must not drift from the originals where both can be compared.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.wire_captures import WIRE_DIR, capture_paths

SHARED_WIRE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "wire"
VERBS = {"filter", "prioritize", "preempt", "bind"}
# The 13 JSON request bodies handed over (the shared directory's 14th file is its README.md).
EXPECTED_CAPTURES = {
    "bind-gpu-managed.json",
    "bind-plain.json",
    "filter-names-plain.json",
    "filter-names-toleration.json",
    "filter-names-zone-affinity.json",
    "filter-nodes-gpu-managed.json",
    "filter-nodes-plain.json",
    "filter-nodes-selector.json",
    "preempt-full-victims-pdb.json",
    "preempt-meta-victims.json",
    "prioritize-names-plain.json",
    "prioritize-nodes-gpu-managed.json",
    "prioritize-nodes-selector.json",
}
VENDOR_ONLY = frozenset({"SOURCE.md"})  # our provenance note; everything else is a copy


def _files(directory: Path, exclude: frozenset[str] = frozenset()) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.is_file() and p.name not in exclude}


def differences(vendored: Path, shared: Path) -> list[str]:
    """What differs between the vendored copy and the shared originals (empty when identical)."""
    ours, theirs = _files(vendored, VENDOR_ONLY), _files(shared)
    out = [f"missing from vendored copy: {n}" for n in sorted(theirs.keys() - ours.keys())]
    out += [f"not in shared originals: {n}" for n in sorted(ours.keys() - theirs.keys())]
    out += [f"bytes differ: {n}" for n in sorted(ours.keys() & theirs.keys()) if ours[n] != theirs[n]]
    return out


def test_vendored_captures_are_complete_and_match_shared() -> None:
    paths = capture_paths()
    missing = EXPECTED_CAPTURES - {p.name for p in paths}
    assert not missing, f"captures missing from {WIRE_DIR}: {sorted(missing)}"
    prefixes = {p.name.split("-", 1)[0] for p in paths}
    assert prefixes == VERBS, f"capture verbs: {sorted(prefixes)}"
    for path in paths:
        assert isinstance(json.loads(path.read_bytes()), dict), f"{path.name} is not a JSON object"
    assert (WIRE_DIR / "README.md").is_file()
    # Drift check, only where the originals are reachable; no skip, so nothing hides in the report.
    if SHARED_WIRE_DIR.is_dir():
        assert differences(WIRE_DIR, SHARED_WIRE_DIR) == []


def test_drift_check_reports_every_kind_of_difference(tmp_path: Path) -> None:
    vendored, shared = tmp_path / "vendored", tmp_path / "shared"
    for d in (vendored, shared):
        d.mkdir()
        (d / "bind-a.json").write_bytes(b'{"PodName":"a"}')
        (d / "filter-b.json").write_bytes(b'{"Pod":{}}')
    (vendored / "SOURCE.md").write_text("provenance")
    assert differences(vendored, shared) == []

    (vendored / "bind-a.json").write_bytes(b'{"PodName":"a"}\n')  # one trailing byte
    (shared / "preempt-c.json").write_bytes(b"{}")
    (vendored / "filter-b.json").rename(vendored / "filter-x.json")
    assert differences(vendored, shared) == [
        "missing from vendored copy: filter-b.json",
        "missing from vendored copy: preempt-c.json",
        "not in shared originals: filter-x.json",
        "bytes differ: bind-a.json",
    ]
