"""How large a compressed file is once decompressed, without decompressing it all.

A reader holds the decompressed data, so the planner sizes a compressed file by that: gzip by
the size its trailer records (modulo 4 GiB, so checked against a sample), zip by its members'
recorded sizes, zstd by the frame's content size where the header gives it, and gzip, bzip2, xz
and zstd otherwise by decompressing the first :data:`SAMPLE` bytes and scaling the ratio.
A file in none of these formats is its own size.
"""

from __future__ import annotations

import bz2
import lzma
import os
import struct
import zipfile
import zlib
from typing import Any, BinaryIO

#: Compressed bytes decompressed to learn a file's ratio.
SAMPLE = 1 << 20
#: What zstd, which the standard library cannot read, is taken to shrink text to when its
#: header does not say (a typical ratio for csv and json at zstd's default level).
ZSTD_RATIO = 4.0

_GZIP = b"\x1f\x8b"
_BZIP2 = b"BZh"
_XZ = b"\xfd7zXZ\x00"
_ZSTD = b"\x28\xb5\x2f\xfd"
_ZIP = b"PK\x03\x04"


def compression(path: str | os.PathLike[str]) -> str | None:
    """``"gzip"``, ``"bzip2"``, ``"xz"``, ``"zstd"`` or ``"zip"`` from the file's first bytes;
    None for anything else (or a file that cannot be read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None
    for magic, name in ((_GZIP, "gzip"), (_BZIP2, "bzip2"), (_XZ, "xz"), (_ZSTD, "zstd")):
        if head.startswith(magic):
            return name
    return "zip" if head.startswith(_ZIP) else None


def uncompressed_size(path: str | os.PathLike[str]) -> int:
    """The file's size once decompressed (an estimate where the format does not record it)."""
    size = os.path.getsize(path)
    kind = compression(path)
    if kind is None or size == 0:
        return size
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as archive:
                return sum(member.file_size for member in archive.infolist())
        if kind == "zstd":
            recorded = _zstd_content_size(path)
            return recorded if recorded is not None else round(size * ZSTD_RATIO)
        sampled = _sampled(path, kind, size)
        return _gzip_recorded(path, size, sampled) if kind == "gzip" else sampled
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error, lzma.LZMAError):
        return size  # damaged: the reader will say so; its size is the best there is


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor()


def decompressed_head(f: BinaryIO, kind: str, compressed: int, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes decompressed from the first ``compressed`` bytes of ``f`` (a gzip,
    bzip2 or xz stream, its members one after another), and the compressed bytes they took."""
    out = bytearray()
    used = 0
    decompressor = _decompressor(kind)
    while used < compressed and len(out) < limit:
        chunk = f.read(min(1 << 16, compressed - used))
        if not chunk:
            break
        used += len(chunk)
        while chunk and len(out) < limit:
            out += decompressor.decompress(chunk)
            if not decompressor.eof:
                break
            chunk = decompressor.unused_data  # the next member (bgzip, pigz --independent)
            decompressor = _decompressor(kind)
    return bytes(out[:limit]), used


def _sampled(path: str | os.PathLike[str], kind: str, size: int) -> int:
    """The size the first :data:`SAMPLE` compressed bytes grow to, scaled to the file."""
    with open(path, "rb") as f:
        out, used = decompressed_head(f, kind, SAMPLE, 1 << 62)
    return max(round(len(out) * size / max(used, 1)), size)


def _gzip_recorded(path: str | os.PathLike[str], size: int, sampled: int) -> int:
    """Gzip's trailer size (of the last member, modulo 2**32) made whole: the value it can
    stand for that is nearest the sampled estimate; the estimate where none is near."""
    with open(path, "rb") as f:
        f.seek(size - 4)
        (recorded,) = struct.unpack("<I", f.read(4))
    wraps = max(round((sampled - recorded) / 2**32), 0)
    whole = recorded + wraps * 2**32
    return whole if sampled / 2 <= whole <= sampled * 2 else sampled


def _zstd_content_size(path: str | os.PathLike[str]) -> int | None:
    """The content size a zstd frame header records, when it records one."""
    with open(path, "rb") as f:
        header = f.read(18)
    descriptor = header[4]
    size_flag, single_segment = descriptor >> 6, (descriptor >> 5) & 1
    dictionary = (0, 1, 2, 4)[descriptor & 3]
    start = 5 + (0 if single_segment else 1) + dictionary
    width = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if width == 0 or len(header) < start + width:
        return None
    value = int.from_bytes(header[start : start + width], "little")
    return value + 256 if width == 2 else value
