"""Memory freed after a large page leaves the process: glibc's thresholds are fixed once a
large artifact is read, instead of rising with the largest block ever freed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from worker import allocator

ON_GLIBC = "CS_GNU_LIBC_VERSION" in getattr(os, "confstr_names", {})

# A 24 MB block freed raises glibc's dynamic mmap threshold to 24 MB; an 8 MB page then
# comes from the heap, and when it is freed glibc keeps it unless twice the threshold lies
# free at the heap's top. Prints how many kB of the freed page the process still holds.
_PAGE_FREED = textwrap.dedent(
    """
    import sys

    def rss_kb():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))

    if sys.argv[1] == "fixed":
        from worker.allocator import fix_malloc_thresholds
        assert fix_malloc_thresholds()
    largest = bytearray(24 << 20)
    del largest
    before = rss_kb()
    page = bytearray(8 << 20)  # zero-filled: every byte of it resident
    del page
    print(rss_kb() - before)
    """
)


def _kept_kb(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PAGE_FREED, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


@pytest.mark.skipif(not ON_GLIBC, reason="glibc's malloc only")
def test_a_freed_page_leaves_the_process_once_the_thresholds_are_fixed() -> None:
    assert _kept_kb("fixed") < 2048


@pytest.mark.skipif(not ON_GLIBC, reason="glibc's malloc only")
def test_without_fixed_thresholds_glibc_keeps_the_freed_page() -> None:
    # The probe above can tell: left to its dynamic thresholds, glibc holds on to it.
    assert _kept_kb("dynamic") > 6 * 1024


def test_elsewhere_than_glibc_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "confstr_names", {}, raising=False)
    monkeypatch.setattr(allocator, "_fixed", None)
    assert allocator.fix_malloc_thresholds() is False
    assert allocator.fix_malloc_thresholds() is False  # decided once


def _confstr_raises(name: str) -> str:
    raise OSError(22, "Invalid argument")


@pytest.mark.parametrize("confstr", [lambda name: "", lambda name: None, _confstr_raises])
def test_a_libc_that_does_not_say_it_is_glibc_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, confstr: Any
) -> None:
    # The name is known, but the answer is empty, missing or refused: not glibc, or a
    # libc that does not say so. Its malloc is left as it is.
    monkeypatch.setattr(os, "confstr_names", {"CS_GNU_LIBC_VERSION": 2}, raising=False)
    monkeypatch.setattr(os, "confstr", confstr, raising=False)
    monkeypatch.setattr(allocator, "_fixed", None)
    assert allocator.fix_malloc_thresholds() is False
