"""Compressed inputs count as what they hold once decompressed."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zipfile

import pytest

from taskcell.planner import input_size
from taskcell.planner.compressed import compression, uncompressed_size

MiB = 1 << 20


def csv_text(rows: int) -> bytes:
    """A csv of numbers: compresses about 3x, as such data does."""
    return b"id,x,y\n" + b"".join(
        f"{i},{(i * 7919) % 10007 / 13:.4f},{(i * 31) % 997}\n".encode() for i in range(rows)
    )


@pytest.fixture(scope="module")
def data() -> bytes:
    return csv_text(400_000)  # about 8 MiB


@pytest.mark.parametrize(
    ("suffix", "write", "kind", "exact"),
    [
        (".gz", lambda p, d: p.write_bytes(gzip.compress(d, 6)), "gzip", True),
        (".bz2", lambda p, d: p.write_bytes(bz2.compress(d)), "bzip2", False),
        (".xz", lambda p, d: p.write_bytes(lzma.compress(d, preset=1)), "xz", False),
    ],
    ids=["gzip", "bzip2", "xz"],
)
def test_a_compressed_file_is_sized_decompressed(tmp_path, data, suffix, write, kind, exact):
    path = tmp_path / f"table.csv{suffix}"
    write(path, data)
    assert os.path.getsize(path) < len(data) / 2
    assert compression(path) == kind
    if exact:  # gzip records it
        assert input_size(str(path)) == len(data)
    else:  # the ratio of a sample, scaled
        assert 0.8 * len(data) <= input_size(str(path)) <= 1.25 * len(data)


def test_a_zip_counts_its_members(tmp_path, data):
    path = tmp_path / "tables.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.csv", data)
        archive.writestr("b.csv", data[: len(data) // 2])
    assert uncompressed_size(path) == len(data) + len(data) // 2


def test_a_multi_member_gzip_is_sized_from_its_sample_not_its_last_member(tmp_path, data):
    # bgzip-style: many members, the trailer of the last one records only its own size.
    path = tmp_path / "blocks.csv.gz"
    with open(path, "wb") as f:
        for start in range(0, len(data), 64 * 1024):
            f.write(gzip.compress(data[start : start + 64 * 1024]))
    assert 0.8 * len(data) <= uncompressed_size(path) <= 1.25 * len(data)


def test_zstd_frame_content_size_from_its_header(tmp_path):
    # A zstd frame header: magic, a descriptor saying "single segment, 4-byte size", the size.
    content = 123_456_789
    path = tmp_path / "data.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + bytes([0b1010_0000]) + content.to_bytes(4, "little"))
    assert uncompressed_size(path) == content


def test_plain_damaged_and_empty_files_are_their_own_size(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_bytes(b"a,b\n1,2\n")
    damaged = tmp_path / "damaged.gz"
    damaged.write_bytes(b"\x1f\x8b" + b"\xff" * 5000)
    empty = tmp_path / "empty.gz"
    empty.write_bytes(b"")
    assert uncompressed_size(plain) == 8
    assert uncompressed_size(damaged) == 5002
    assert uncompressed_size(empty) == 0
    assert compression(tmp_path / "missing.gz") is None
