"""The digest log's temporary file gives back what was written, reads and writes interleaved."""

from __future__ import annotations

import os

import pytest

from worker.digest_file import DigestFile


def test_reads_see_every_write_before_them_and_nothing_past_them() -> None:
    with DigestFile() as store:
        first = store.append(b"a" * 10)
        assert store.read(first, 10) == b"a" * 10
        second = store.append(b"bc")  # buffered, after a read: the next read must see it
        assert (first, second) == (0, 10)
        assert store.read(9, 3) == b"abc"
        assert store.read(second, 2) == b"bc"
        with pytest.raises(ValueError):
            store.read(11, 2)
    with DigestFile() as unused, pytest.raises(ValueError):
        unused.read(0, 1)  # no file is made until the first write


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_closing_drops_the_file_and_the_next_write_starts_a_new_one() -> None:
    before = _open_descriptors()
    with DigestFile() as store:
        store.append(b"x" * 100)
        assert _open_descriptors() == before + 1
    assert _open_descriptors() == before  # leaving the block closed it
    store.append(b"ab")  # a new file, from offset 0
    assert store.read(0, 2) == b"ab"
    with pytest.raises(ValueError):
        store.read(2, 1)  # the old file's 100 bytes are gone
    store.close()
    assert _open_descriptors() == before


def test_a_short_read_is_an_error_not_fewer_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    # A file cut short under the worker (its disk, another process) must fail the turn,
    # not hand the repeats' search a page with digests missing.
    with DigestFile() as store:
        store.append(b"a" * 16)
        monkeypatch.setattr(os, "pread", lambda fd, size, offset: b"a" * (size - 8))
        with pytest.raises(OSError, match="short read of the digest file: 8 of 16 bytes"):
            store.read(0, 16)
