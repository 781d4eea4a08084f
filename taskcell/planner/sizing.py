"""How big is the input? A size, files, a DataFrame or an array, in bytes."""

from __future__ import annotations

import glob
import operator
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from taskcell.errors import SpecError
from taskcell.spec import parse_quantity

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
          summed, a directory's files included, each file counted once;
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
        For a negative number, a string that is neither a quantity nor matches any file, or an
        object of another kind; the message lists the accepted forms.

    Examples
    --------
    >>> input_size("12 GiB")
    12884901888
    >>> input_size(["1Gi", 1024])
    1073742848
    """
    seen: set[str] = set()
    return _size(size, seen)


def _size(size: Any, seen: set[str]) -> int:
    if isinstance(size, bool):
        raise SpecError(f"size= must be {_FORMS}, got {size!r}")
    if isinstance(size, int | float):
        if size < 0 or size != size:
            raise SpecError(f"size= must be zero or more bytes, got {size!r}")
        return int(size)
    if isinstance(size, str):
        return _text(size, seen)
    if isinstance(size, os.PathLike):
        return _files([os.fspath(size)], os.fspath(size), seen)
    if hasattr(size, "memory_usage") and hasattr(size, "dtypes"):  # pandas, without importing it
        usage = size.memory_usage(deep=True)
        return int(usage.sum() if hasattr(usage, "sum") else usage)
    nbytes = getattr(size, "nbytes", None)
    if nbytes is not None and hasattr(nbytes, "__index__") and not callable(nbytes):
        return operator.index(nbytes)
    if isinstance(size, list | tuple | set | frozenset):
        return sum(_size(item, seen) for item in size)
    raise SpecError(f"size= must be {_FORMS}, got a {type(size).__name__}: {size!r:.80}")


def _text(text: str, seen: set[str]) -> int:
    stripped = text.strip()
    if not stripped:
        raise SpecError(f"size= must be {_FORMS}, got an empty string")
    if stripped in ("0", "0B"):
        return 0
    try:
        return parse_quantity(stripped, "size")
    except SpecError:
        pass
    pattern = os.path.expanduser(stripped)
    matches = glob.glob(pattern, recursive=True) if _GLOB_CHARS & set(pattern) else [pattern]
    return _files(matches, text, seen)


def _files(paths: Iterable[str], asked: str, seen: set[str]) -> int:
    total = 0
    found = False
    for path in paths:
        p = Path(path)
        if p.is_dir():
            found = True
            files: Iterable[Path] = (f for f in p.rglob("*") if f.is_file())
        elif p.is_file():
            found = True
            files = (p,)
        else:
            continue
        for f in files:
            real = os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                total += f.stat().st_size
    if not found:
        raise SpecError(
            f"size= {asked!r} is not a quantity and matches no file or directory; give {_FORMS}"
        )
    return total
