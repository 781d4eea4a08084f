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
    """A DataFrame's or Series' bytes, its objects' included."""
    usage = frame.memory_usage(deep=True)
    return int(usage.sum() if hasattr(usage, "sum") else usage)


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
    path: str | os.PathLike[str],
    holding: str,
    function: str = "read_csv",
    columns: tuple[str, ...] | None = None,
) -> float | None:
    """Bytes in memory per byte of the file (decompressed), for a file the cell holds as
    ``holding`` (see :data:`taskcell.planner.recognize.Holding`); None where a sample cannot
    tell (an empty or unparsable file, or a holding whose size is the file's own). A
    columnar file is measured per byte on disk, reading only ``columns`` where given."""
    if holding == "columnar":
        return _columnar_expansion(path, columns)
    if holding == "pickle":
        return _pickle_expansion(path)
    if holding == "xml":
        return _xml_expansion(path, function)
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


def file_format(path: str | os.PathLike[str]) -> str | None:
    """``"parquet"``, ``"arrow"`` (Arrow IPC, Feather 2) or ``"npy"`` from the file's own magic
    bytes, whatever the reader's name says; None for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return None
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1"):
        return "arrow"
    return "npy" if head.startswith(b"\x93NUMPY") else None


def _columnar_expansion(
    path: str | os.PathLike[str], columns: tuple[str, ...] | None
) -> float | None:
    """A Parquet or Arrow file's DataFrame bytes per file byte: the first rows of the columns
    read, converted as pandas does, times the row count its footer records."""
    try:
        rows, first = _columnar_head(path, list(columns) if columns else None)
        if first is None or first.num_rows == 0 or rows == 0:
            return None
        per_row = _frame_bytes(first.to_pandas()) / first.num_rows
        return per_row * rows / max(os.path.getsize(path), 1)
    except Exception:  # another format (ORC, Feather 1), columns it lacks, or no pyarrow
        return None


def _columnar_head(path: str | os.PathLike[str], columns: list[str] | None) -> tuple[int, Any]:
    """The rows a columnar file's footer records, and its first rows of ``columns``."""
    if file_format(path) == "parquet":
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        parquet = pq.ParquetFile(path)
        first = next(parquet.iter_batches(batch_size=20_000, columns=columns), None)
        return parquet.metadata.num_rows, first
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_file(source)
        rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        first = reader.get_batch(0) if reader.num_record_batches else None
        if first is not None and columns:
            first = first.select(columns)
        if first is not None:
            first = first.slice(0, 20_000)
            first = pa.RecordBatch.from_pylist(first.to_pylist(), schema=first.schema)
        return rows, first


#: What unpickling makes of each opcode, in bytes of Python objects (CPython 3.11, 64-bit):
#: the object and the reference its container keeps. Strings and bytes add their length.
_PICKLED = {
    "BININT": 36, "BININT1": 8, "BININT2": 36, "LONG1": 40, "BINFLOAT": 32, "NEWTRUE": 8,
    "NEWFALSE": 8, "NONE": 8, "EMPTY_DICT": 72, "EMPTY_LIST": 64, "EMPTY_TUPLE": 8,
    "EMPTY_SET": 224, "TUPLE1": 56, "TUPLE2": 64, "TUPLE3": 72, "TUPLE": 48, "SETITEM": 40,
    "SETITEMS": 0, "APPEND": 8, "APPENDS": 0, "NEWOBJ": 56, "REDUCE": 56, "BUILD": 104,
    "BINUNICODE": 57, "SHORT_BINUNICODE": 57, "BINUNICODE8": 57, "SHORT_BINBYTES": 41,
    "BINBYTES": 41, "BINBYTES8": 41, "BYTEARRAY8": 65, "BINGET": 8, "LONG_BINGET": 8,
    "MEMOIZE": 24, "BINPUT": 24, "LONG_BINPUT": 24, "MARK": 8, "ADDITEMS": 0,
}  # fmt: skip
#: Opcodes whose argument is counted bytes: the length prefix's width.
_COUNTED = {
    "SHORT_BINUNICODE": 1, "SHORT_BINBYTES": 1, "SHORT_BINSTRING": 1, "BINUNICODE": 4,
    "BINBYTES": 4, "BINSTRING": 4, "BINUNICODE8": 8, "BINBYTES8": 8, "BYTEARRAY8": 8,
}  # fmt: skip


def _pickle_expansion(path: str | os.PathLike[str]) -> float | None:
    """The Python objects a pickle unpickles into, per byte of it: its opcodes read over a
    :data:`SAMPLE` of the file (large strings and buffers skipped, not read), each counted
    as the object it builds (:data:`_PICKLED`); a buffer (an array's data) as its length."""
    import pickletools

    made = scanned = 0
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            while scanned < SAMPLE:
                code = f.read(1)
                if not code:
                    break
                op = getattr(pickletools, "code2op").get(code.decode("latin-1"))  # noqa: B009
                if op is None:
                    return None
                made += _PICKLED.get(op.name, 0)
                width = _COUNTED.get(op.name)
                if width:
                    length = int.from_bytes(f.read(width), "little")
                    made += length
                    f.seek(length, os.SEEK_CUR)
                elif op.name == "STOP":
                    break
                elif op.arg is not None and op.arg.n > 0:
                    f.read(op.arg.n)
                elif op.arg is not None and op.name not in ("FRAME",):
                    op.arg.reader(f)
                scanned = f.tell()
        return made / max(min(scanned, size), 1)
    except Exception:  # an old protocol's text opcodes, or a damaged file
        return None


def _closed_xml(sample: bytes) -> bytes:
    """The sample cut after its last whole line of elements, with the elements still open
    closed, so that any XML parser takes it."""
    import xml.etree.ElementTree as ET

    parser: Any = ET.XMLPullParser(events=("start", "end"))
    open_tags: list[str] = []
    cut = 0
    for line in sample.splitlines(keepends=True):
        try:
            parser.feed(line)
        except ET.ParseError:
            break
        for event, element in parser.read_events():
            if event == "start":
                open_tags.append(element.tag)
            else:
                open_tags.pop()
        cut += len(line)
    return sample[:cut] + b"".join(f"</{tag}>".encode() for tag in reversed(open_tags))


def _xml_expansion(path: str | os.PathLike[str], function: str) -> float | None:
    """The tree an XML parser builds, per byte of the file: a sample parsed by the same
    library (``minidom`` builds a DOM, ElementTree and the rest element trees)."""
    try:
        sample = _closed_xml(head(path))
        if "minidom" in function or "pulldom" in function:
            from xml.dom import minidom

            return python_bytes(lambda: minidom.parseString(sample)) / len(sample)
        import xml.etree.ElementTree as ET

        return python_bytes(lambda: ET.fromstring(sample)) / len(sample)
    except Exception:  # not XML after all: the profile's factor stands
        return None


def text_op_bytes(path: str | os.PathLike[str], function: str, op: Any) -> float | None:
    """What a ``.str`` method (:class:`~taskcell.planner.recognize.TextOp`) makes of a text
    file's column, per byte of the file: the method run on the column of a parsed sample
    (Python objects as :mod:`tracemalloc` sees them, a frame by its own deep size)."""
    try:
        sample = head(path)
        frame = _pandas(function.rpartition(".")[2])(io.BytesIO(sample))
        texts = frame.select_dtypes(exclude="number")
        column = frame[op.column] if op.column in frame else texts.iloc[:, 0]
        made: list[Any] = []

        def run() -> list[Any]:
            made.append(getattr(column.str, op.method)(*op.args, **dict(op.kwargs)))
            return made

        traced = python_bytes(run)
        deep = _frame_bytes(made[0]) if hasattr(made[0], "memory_usage") else 0
        return max(traced, deep) / len(sample)
    except Exception:  # a column the sample lacks, arguments pandas refuses
        return None
