"""How big is the input? A size, files, a DataFrame or an array, in bytes.

A compressed file counts as what it holds once decompressed (:mod:`.compressed`): that is
what a reader holds in memory.
"""

from __future__ import annotations

import glob
import numbers
import operator
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from taskcell.errors import SpecError
from taskcell.planner.compressed import uncompressed_size
from taskcell.spec import parse_quantity
from taskcell.spec._util import MAX_AMOUNT, shown

_FORMS = (
    'a quantity such as "12 GiB" or 500e6, file paths or globs such as "data/*.parquet", '
    "a pandas DataFrame or Series, or a numpy array"
)
_GLOB_CHARS = frozenset("*?[")


def input_size(size: Any) -> int:
    """Estimate an input's size in bytes.

    Parameters
    ----------
    size : int, float, str, path, DataFrame, Series, array or a list of these
        - a number of bytes, or a quantity: ``"12 GiB"``, ``"500M"``, ``"1.5Ti"``;
        - a file path or glob (``"data/*.csv"``, ``"~/runs/**/*.parquet"``): the files' sizes
          summed, a directory's files included, each file counted once, and a compressed file
          (gzip, bzip2, xz, zstd, zip) by its size once decompressed;
        - a pandas DataFrame or Series: its ``memory_usage(deep=True)``;
        - a numpy (or any) array: its ``nbytes``;
        - a list or tuple of any of these: the sum.

    Returns
    -------
    int
        Bytes, zero or more.

    Raises
    ------
    SpecError
        For a negative, infinite or impossibly large number (over 4 EiB), a string that is
        neither a quantity nor matches any file, or an object of another kind; the message
        lists the accepted forms.

    Examples
    --------
    >>> input_size("12 GiB")
    12884901888
    >>> input_size(["1Gi", 1024])
    1073742848
    """
    seen: set[str] = set()
    return _size(size, seen, ())


#: How deep lists of inputs may nest: far more than anyone writes, far less than Python's stack.
_MOST_NESTED = 32


def _size(size: Any, seen: set[str], within: tuple[int, ...]) -> int:
    if isinstance(size, bool):
        raise SpecError(f"size= must be {_FORMS}, got {size!r}")
    if isinstance(size, numbers.Real):  # numpy's scalars too: 8 bytes is not what they mean
        return _bytes(size)
    if isinstance(size, str):
        return _text(size, seen)
    if isinstance(size, os.PathLike):
        return _files([os.fspath(size)], os.fspath(size), seen)
    usage = getattr(size, "memory_usage", None)
    if callable(usage) and hasattr(size, "dtypes"):  # pandas, without importing it
        used = usage(deep=True)
        total = used.sum() if callable(getattr(used, "sum", None)) else used
        return _bytes(total, f"the memory_usage(deep=True) of a {type(size).__name__}")
    nbytes = getattr(size, "nbytes", None)
    if nbytes is not None and hasattr(nbytes, "__index__") and not callable(nbytes):
        return _bytes(operator.index(nbytes), f"the nbytes of a {type(size).__name__}")
    if isinstance(size, list | tuple | set | frozenset):
        if id(size) in within:
            raise SpecError(
                f"size= must be {_FORMS}, got a {type(size).__name__} that holds itself"
            )
        if len(within) >= _MOST_NESTED:
            raise SpecError(
                f"size= must be {_FORMS}, got lists nested more than {_MOST_NESTED} deep"
            )
        return sum(_size(item, seen, (*within, id(size))) for item in size)
    raise SpecError(f"size= must be {_FORMS}, got a {type(size).__name__}: {shown(size)}")


def _bytes(value: Any, what: str = "") -> int:
    """A count of bytes (an int or float, numpy's and pandas' scalars included), checked."""
    of = f" ({what})" if what else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SpecError(f"size= must be a number of bytes{of}, got {shown(value)}")
    number: Any = value  # a Real: compared and truncated as such (numbers.Real types poorly)
    if not number >= 0:  # negative or NaN
        raise SpecError(f"size= must be zero or more bytes{of}, got {_short(number)}")
    if number > MAX_AMOUNT:  # infinity too
        raise SpecError(
            f"size= must be a number of bytes up to 4 EiB (no machine holds more){of}, got "
            f"{_short(number)}"
        )
    return int(number)


def _text(text: str, seen: set[str]) -> int:
    stripped = text.strip()
    if not stripped:
        raise SpecError(f"size= must be {_FORMS}, got an empty string")
    if stripped in ("0", "0B"):
        return 0
    try:
        return parse_quantity(stripped, "size")
    except SpecError as e:
        refused = e
    pattern = os.path.expanduser(stripped)
    try:
        matches = glob.glob(pattern, recursive=True) if _GLOB_CHARS & set(pattern) else [pattern]
    except (OSError, ValueError):  # a name too long for the file system, a NUL in it
        matches = []
    try:
        return _files(matches, text, seen)
    except SpecError:
        if stripped[0].isdigit() or stripped[0] == ".":  # meant as a number: say why not
            raise refused from None
        raise


def _short(value: Any) -> str:
    return shown(value, 40)


def _kind(path: Path) -> str | None:
    """``"dir"``, ``"file"`` or None (nothing there, or a name no file system takes)."""
    try:
        return "dir" if path.is_dir() else "file" if path.is_file() else None
    except (OSError, ValueError):
        return None


def file_size(path: str | os.PathLike[str]) -> int:
    """A file's size as a reader holds it: compressed files by their size decompressed."""
    return uncompressed_size(path)


def _files(paths: Iterable[str], asked: str, seen: set[str]) -> int:
    total = 0
    found = False
    for path in paths:
        p = Path(path)
        kind = _kind(p)
        if kind is None:
            continue
        found = True
        files: Iterable[Path] = (f for f in p.rglob("*") if f.is_file()) if kind == "dir" else (p,)
        for f in files:
            real = os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                total += file_size(f)
    if not found:
        raise SpecError(
            f"size= {_short(asked)} is not a quantity and matches no file or directory; "
            f"give {_FORMS}"
        )
    return total
