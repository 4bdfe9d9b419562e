"""Cache entries as bytes, for the shared tier in Redis, and back.

An entry travels with the digests of the node parts it rests on (``fingerprints.digests``); it is
taken back only for a node whose parts have those same digests now, so an entry computed by
another replica, or on an older snapshot, is used only where its inputs are unchanged.
"""

from __future__ import annotations

import struct
import zlib

from extenders.equivalence.fingerprints import DIGEST_SIZE
from extenders.plugins.framework import Verdict

# layout tag, how many of the layout's families the verdict rests on, the first failing local
# step (-1: none), flags (_FAILED, _UNRESOLVABLE); then the digests, then the reason in UTF-8.
_FILTER_HEAD = struct.Struct("<IBbB")
_FAILED = 1
_UNRESOLVABLE = 2


def layout_tag(signature: str) -> int:
    """A short tag of a filter layout (its steps and families, in order): an entry is read back
    only under the same layout, since its step positions and family count refer to it."""
    return zlib.crc32(signature.encode())


def pack_filter(tag: int, known: int, failed_at: int, verdict: Verdict | None, digests: bytes) -> bytes:
    """``digests``: the node's digests of the layout's families (only the first ``known`` are kept)."""
    flags = 0
    reason = b""
    if verdict is not None:
        flags = _FAILED | (_UNRESOLVABLE if verdict.unresolvable else 0)
        reason = verdict.reason.encode("utf-8", "surrogatepass")
    return _FILTER_HEAD.pack(tag, known, failed_at, flags) + digests[: known * DIGEST_SIZE] + reason


def unpack_filter(blob: bytes, tag: int, digests: bytes) -> tuple[int, int, Verdict | None] | None:
    """(known, failed_at, verdict) of an entry still valid for a node whose current digests of the
    layout's families are ``digests``; None when it is not (another layout, the node changed, or
    bytes this version cannot read)."""
    head = _FILTER_HEAD.size
    if len(blob) < head:
        return None
    blob_tag, known, failed_at, flags = _FILTER_HEAD.unpack_from(blob)
    end = head + known * DIGEST_SIZE
    if blob_tag != tag or len(digests) < known * DIGEST_SIZE or blob[head:end] != digests[: end - head]:
        return None
    if not flags & _FAILED:
        return known, failed_at, None
    try:
        reason = blob[end:].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return known, failed_at, Verdict(False, reason, bool(flags & _UNRESOLVABLE))


def pack_scores(values: tuple[float, ...], digests: bytes) -> bytes:
    """``digests``: the node's digests of every family the scorers read."""
    return digests + struct.pack(f"<{len(values)}d", *values)


def unpack_scores(blob: bytes, members: int, digests: bytes) -> tuple[float, ...] | None:
    """The raw scores of ``members`` scorers, if the node's digests are still ``digests``."""
    if len(blob) != len(digests) + 8 * members or not blob.startswith(digests):
        return None
    values: tuple[float, ...] = struct.unpack_from(f"<{members}d", blob, len(digests))
    return values
