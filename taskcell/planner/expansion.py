"""How much memory a file takes once read, from a sample of it.

A csv of small integers becomes a DataFrame four times its size, one of long floats half its
size; a text of short words becomes a list ten times its size. The planner reads the first
:data:`SAMPLE` bytes of the file (decompressed where it is compressed), parses them as the cell
would (pandas for a DataFrame, :mod:`json`, :meth:`str.split` or :mod:`csv` for Python
objects, pyarrow for Parquet) and measures the result: a DataFrame by
``memory_usage(deep=True)``, Python objects by :mod:`tracemalloc`. The ratio to the sample's
bytes is the file's :func:`expansion`. A sample that cannot be parsed gives None, and the
caller falls back on the profile's factor.
"""

from __future__ import annotations

import csv
import io
import json
import lzma
import os
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

from taskcell.planner.compressed import compression, decompressed_head

#: Bytes of a file parsed to learn its expansion.
SAMPLE = 1 << 20


def head(path: str | os.PathLike[str], nbytes: int = SAMPLE) -> bytes:
    """The file's first ``nbytes`` bytes, decompressed where it is compressed, cut after its
    last whole line (all of it when it has no line break)."""
    kind = compression(path)
    with open(path, "rb") as f:
        if kind is None:
            data = f.read(nbytes)
        elif kind in ("zip", "zstd"):  # not a stream the standard library reads in pieces
            return b""
        else:
            try:
                data = decompressed_head(f, kind, 1 << 62, nbytes)[0]
            except (EOFError, OSError, zlib.error, lzma.LZMAError):
                return b""
    cut = data.rfind(b"\n")
    return data[: cut + 1] if cut >= 0 else data


def python_bytes(make: Callable[[], Any]) -> int:
    """The bytes of the Python objects ``make()`` returns, as :mod:`tracemalloc` sees them."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = make()
        return max(tracemalloc.get_traced_memory()[0] - before, 0) if made is not None else 0
    finally:
        if not tracing:
            tracemalloc.stop()


def _frame_bytes(frame: Any) -> int:
    return int(frame.memory_usage(deep=True).sum())


def _json_elements(text: str) -> Any:
    """The sample parsed as one document: a JSON array cut after its last whole element (as
    one document, so its objects share their keys as ``json.load``'s do)."""
    stripped = text.lstrip()
    if not stripped.startswith("["):
        return json.loads(stripped)
    decoder = json.JSONDecoder()
    at = end = text.index("[") + 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        try:
            at = decoder.raw_decode(text, at)[1]
        except json.JSONDecodeError:
            break
        end = at
    return json.loads(text[:end] + "]")


def _pandas(function: str) -> Callable[..., Any]:
    import pandas as pd

    reader = getattr(pd, function, None)
    return reader if callable(reader) else pd.read_csv


def _parsers(function: str) -> dict[str, Callable[[bytes], int]]:
    """holding -> the bytes the sample takes once parsed that way."""
    return {
        "csv": lambda b: _frame_bytes(_pandas(function)(io.BytesIO(b))),
        "json-lines-frame": lambda b: python_bytes(
            lambda: [json.loads(line) for line in b.splitlines() if line.strip()]
        ),
        "json-frame": lambda b: python_bytes(lambda: _json_elements(b.decode())),
        "json": lambda b: python_bytes(lambda: _json_elements(b.decode())),
        "json-lines": lambda b: python_bytes(
            lambda: [json.loads(line) for line in b.splitlines() if line.strip()]
        ),
        "words": lambda b: python_bytes(lambda: b.decode().split()),
        "lines": lambda b: python_bytes(lambda: b.decode().splitlines(keepends=True)),
        "csv-rows": lambda b: python_bytes(
            lambda: list(csv.reader(io.StringIO(b.decode(), newline="")))
        ),
        "csv-dicts": lambda b: python_bytes(
            lambda: list(csv.DictReader(io.StringIO(b.decode(), newline="")))
        ),
        "text-array": lambda b: _loadtxt_bytes(b),
    }


def _loadtxt_bytes(sample: bytes) -> int:
    import numpy as np

    return int(np.loadtxt(io.BytesIO(sample), ndmin=1).nbytes)


def expansion(
    path: str | os.PathLike[str], holding: str, function: str = "read_csv"
) -> float | None:
    """Bytes in memory per byte of the file (decompressed), for a file the cell holds as
    ``holding`` (see :data:`taskcell.planner.recognize.Holding`); None where a sample cannot
    tell (an empty or unparsable file, or a holding whose size is the file's own)."""
    if holding == "columnar":
        return _columnar_expansion(path)
    parse = _parsers(function.rpartition(".")[2]).get(holding)
    if parse is None:
        return None
    try:
        sample = head(path)
        if not sample:
            return None
        return parse(sample) / len(sample)
    except Exception:  # a sample a parser refuses: the profile's factor stands
        return None


def _columnar_expansion(path: str | os.PathLike[str]) -> float | None:
    """A Parquet file's DataFrame bytes per file byte, from its first rows and its row count."""
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        parquet = pq.ParquetFile(path)
        rows = parquet.metadata.num_rows
        first = next(parquet.iter_batches(batch_size=20_000), None)
        if first is None or first.num_rows == 0 or rows == 0:
            return None
        per_row = _frame_bytes(first.to_pandas()) / first.num_rows
        return per_row * rows / max(os.path.getsize(path), 1)
    except Exception:  # not Parquet (Feather, ORC), or no pyarrow
        return None
