"""A row's digest: a 64-bit fingerprint, equal for two rows exactly when their canonical
JSON is equal (keys sorted, compact, non-ASCII kept), so repeats are found without keeping rows.

The canonical text costs a JSON encoder and float formatting per row. The digest hashes
the row's MessagePack bytes instead (msgspec, keys sorted): a binary form that is one to
one with the canonical text for every row it can encode, except that it tells apart the
NaNs that JSON prints alike. So any row whose bytes could hold a NaN or an infinity (a
float64 starting 0x7f or 0xff), or that MessagePack cannot encode (an integer past 64
bits, a lone surrogate, a key that is not text), is digested by its canonical text. The
two kinds of input never meet: MessagePack bytes of a dict start with a map marker, the
canonical text with `{`. Collisions of the 64-bit hash are as rare as those of any 64-bit
digest (2**-64 a pair); the built-in bytes hash (SipHash) is keyed per process, which is
fine for a fingerprint that never leaves it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

_PACKED: Final = msgspec.msgpack.Encoder(order="sorted").encode
_CANONICAL: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode
# MessagePack writes a float as 0xcb and 8 big-endian bytes; a first byte of 0x7f or 0xff
# is a NaN, ±Infinity or a magnitude past 2**1008. 0xcb never precedes those bytes in text
# (UTF-8), so elsewhere the pair only turns up by chance inside a number's bytes: the
# canonical text then decides, which is always right, only slower. One pass of a regular
# expression: searching for each pair alone stopped at every 0xcb (one a float), twice.
_WIDE_FLOAT: Final = re.compile(b"\xcb[\x7f\xff]")
_MASK: Final = (1 << 64) - 1
# Rows packed together before their bytes are checked: bounds the transient bytes to ~1 MB.
_BATCH_ROWS: Final = 4096


def row_digest(row: dict[str, Any]) -> int:
    """A 64-bit fingerprint of the row: equal exactly when the canonical JSON texts are."""
    try:
        packed = _PACKED(row)
    except (TypeError, ValueError, OverflowError):  # msgspec.EncodeError is a ValueError
        return canonical_digest(row)
    if _WIDE_FLOAT.search(packed) is not None:
        return canonical_digest(row)
    return hash(packed) & _MASK


def row_digests(rows: Sequence[dict[str, Any]]) -> list[int]:
    """`[row_digest(row) for row in rows]`, packed and hashed in C where the rows allow it."""
    digests: list[int] = []
    for start in range(0, len(rows), _BATCH_ROWS):
        batch = rows[start : start + _BATCH_ROWS]
        try:
            packed = list(map(_PACKED, batch))
        except (TypeError, ValueError, OverflowError):
            digests.extend(map(row_digest, batch))
            continue
        # A row's bytes start with a map marker (0x80-0x8f, 0xde, 0xdf), never 0x7f or
        # 0xff, so the pairs cannot be made across two rows' bytes joined.
        joined = b"".join(packed)
        if _WIDE_FLOAT.search(joined) is not None:
            digests.extend(map(row_digest, batch))
        else:
            digests.extend(map(_MASK.__and__, map(hash, packed)))
    return digests


def canonical_digest(row: dict[str, Any]) -> int:
    """The digest of the row's canonical JSON text (a lone surrogate kept as it is)."""
    return hash(_CANONICAL(row).encode("utf-8", "surrogatepass")) & _MASK
