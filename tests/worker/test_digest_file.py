"""The digest log's temporary file gives back what was written, reads and writes interleaved."""

from __future__ import annotations

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
