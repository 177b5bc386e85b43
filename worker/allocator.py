"""glibc malloc's thresholds, fixed so that memory freed after a large page leaves the process.

glibc raises its mmap threshold to the size of the largest block freed so far (up to 32 MB)
and then trims its heap only when twice that is free at the top. Once the first artifact of
a large export (~9 MB of bytes) is freed, the next pages' bytes, row lists and the digest
table come from the heap instead of mappings of their own, and what they leave behind when
freed stays resident: a 10-page export of 100,000 rows a page ended ~30 MB above what was
alive (benchmarks/PROFILE.md, peak RSS). Fixed thresholds keep blocks of 1 MiB and more in
mappings that are returned on free, and trim the heap once 4 MiB lie free at its top. Only
processes that handle a large artifact set them (the import of ctypes costs start-up ~2 ms);
elsewhere than glibc nothing is done.
"""

from __future__ import annotations

import os
from typing import Final

MMAP_THRESHOLD_BYTES: Final = 1 << 20
TRIM_THRESHOLD_BYTES: Final = 4 << 20
# mallopt's parameter numbers (malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3

_fixed: bool | None = None  # None until tried; then whether glibc took both settings


def fix_malloc_thresholds() -> bool:
    """Set glibc's mmap and trim thresholds once per process; whether they are set."""
    global _fixed
    if _fixed is None:
        _fixed = _set_thresholds()
    return _fixed


def _set_thresholds() -> bool:
    if "CS_GNU_LIBC_VERSION" not in getattr(os, "confstr_names", {}):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
    except (OSError, ValueError):
        return False
    import ctypes

    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # Each call returns 1 on success; the mmap threshold first, so no block is placed by
    # the old one once trimming follows the new.
    return bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
