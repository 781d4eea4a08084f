"""``/taskcell/api/planner``: the planner's suggestion for a size and a profile, as JSON.

Validates what a browser sends (a careless or hostile body gets a message naming the field),
then asks :mod:`taskcell.planner` with the live workers of the cluster the sidebar shows.

The size is what the notebook panel takes, as a browser can give it: a quantity (``"12 GiB"``,
``500e6``, the spec's own message for a slip such as ``"12Gb"``), a number of bytes (the
sidebar measures a DataFrame's name through the notebook's kernel and sends its bytes), or file
paths and globs relative to the folder of the notebook named by ``notebook``, the files' sizes
summed by :func:`taskcell.planner.sizing.input_size`. Files are read only inside the server's
root (symlinks resolved) and, unless the server serves hidden files, not hidden ones, so a page
cannot walk the server's disk; the walk runs in a thread, off the event loop.
"""

from __future__ import annotations

import glob
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskcell.extension.payloads import PlannerChoices, Profile, shown
from taskcell.planner.schema import Snapshot, SuggestionInfo

#: Longest size string accepted; a quantity such as "12 GiB" is a dozen characters.
MAX_TEXT = 200

#: Largest size accepted, in bytes: 4 EiB, far more than any cluster holds. A bound of our own,
#: so the planner never works with a number as large as a browser may send (``1e308``).
MAX_SIZE = 2**62

_FORMS = 'a quantity such as "12 GiB", "500M" or 500e6'
#: Most paths a glob may match.
MAX_MATCHES = 10_000
#: A number and a unit, in ASCII: a quantity, however mistyped (never a file).
_AMOUNT = re.compile(r"^\s*[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?\s*[A-Za-z]*\s*$")


class RequestError(ValueError):
    """A planner request the server cannot answer: the message says which field and why."""


@dataclass(frozen=True, kw_only=True)
class SuggestRequest:
    """A checked ``POST /taskcell/api/planner`` body: ``size`` in bytes, or ``files``, paths or
    globs to measure beside ``notebook``."""

    size: int | None
    files: str | None
    profile: str
    cluster: str | None
    notebook: str | None


def _text(data: dict[str, Any], name: str, required: bool) -> str | None:
    value = data.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RequestError(f"{name!r} must be a non-empty string, got {shown(value)}")
    if len(value) > MAX_TEXT:
        raise RequestError(
            f"{name!r} must be at most {MAX_TEXT} characters long, got {shown(value)}"
        )
    return value.strip()


def parse_request(data: dict[str, Any]) -> SuggestRequest:
    """Check a request body: ``size`` (a quantity, a number of bytes, or paths and globs),
    ``profile``, and optionally ``cluster`` (an id from ``GET /taskcell/api/clusters``) and
    ``notebook`` (the notebook's path, as the contents API names it, for paths beside it)."""
    unknown = sorted(set(data) - {"size", "profile", "cluster", "notebook"})
    if unknown:
        raise RequestError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; "
            "the planner takes 'size', 'profile', 'cluster' and 'notebook'"
        )
    size = data.get("size")
    if isinstance(size, bool) or not isinstance(size, (str, int, float)):
        raise RequestError(f"'size' must be {_FORMS} or a number of bytes, got {shown(size)}")
    notebook = _text(data, "notebook", False)
    files = None
    if isinstance(size, str):
        text = _text(data, "size", True) or ""
        nbytes = _quantity(text, notebook is not None)
        files = text if nbytes is None else None
    elif not 0 <= size < math.inf:
        raise RequestError(
            f"'size' must be a finite, non-negative number of bytes, got {shown(size)}"
        )
    else:
        nbytes = int(size)
    if nbytes is not None and nbytes > MAX_SIZE:
        raise RequestError(f"'size' must be at most {MAX_SIZE} bytes (4 EiB), got {shown(size)}")
    profile = _text(data, "profile", False) or default_profile()
    cluster = _text(data, "cluster", False)
    return SuggestRequest(
        size=nbytes, files=files, profile=profile, cluster=cluster, notebook=notebook
    )


def _quantity(text: str, files: bool) -> int | None:
    """The bytes ``text`` means as a quantity; None for paths to measure when ``files``."""
    from taskcell.errors import SpecError
    from taskcell.spec import parse_quantity

    if text in ("0", "0B"):
        return 0
    try:
        return parse_quantity(text, "size")
    except (SpecError, ValueError, OverflowError) as e:
        if _AMOUNT.match(text):  # an amount, mistyped: the spec says how ("'Gb' means bits")
            raise RequestError(str(e)) from None
        if files:
            return None
        raise RequestError(
            f"'size' must be {_FORMS}, got {shown(text)} (files are read beside a notebook: "
            "ask from one)"
        ) from None


def measure(files: str, notebook: Path, root: Path, hidden: bool) -> int:
    """The bytes of the files and folders ``files`` (paths or globs, relative to
    ``notebook``'s folder) name inside ``root``, hidden ones only when ``hidden``."""
    from taskcell.errors import SpecError
    from taskcell.planner.sizing import input_size

    if os.path.isabs(files) or files.startswith("~") or "\0" in files:
        raise RequestError(
            f"'size' must name files relative to the notebook's folder, got {shown(files)}"
        )
    folder = notebook.parent

    def shown_here(path: Path) -> bool:
        real = path.resolve()
        if not real.is_relative_to(root):
            return False
        return hidden or not any(part.startswith(".") for part in real.relative_to(root).parts)

    found: list[Path] = []
    for pattern in (p.strip() for p in files.split(",")):
        for match in glob.iglob(str(folder / pattern), recursive=True):
            path = Path(match)
            inside = path.rglob("*") if path.is_dir() else [path]
            found += [f.resolve() for f in inside if f.is_file() and shown_here(f)]
            if len(found) > MAX_MATCHES:
                raise RequestError(f"'size' matches more than {MAX_MATCHES} files: {shown(files)}")
    if not found:
        raise RequestError(
            f"size= {files!r} is not a quantity and matches no file beside "
            f"{notebook.name}; give {_FORMS}, or paths and globs relative to the notebook"
        )
    try:
        return input_size(found)
    except (SpecError, OSError) as e:
        raise RequestError(str(e)) from None


def default_profile() -> str:
    from taskcell import planner

    return planner.DEFAULT_PROFILE


def choices() -> PlannerChoices:
    """The profiles the form offers (name and description), and the default one."""
    from taskcell import planner

    return PlannerChoices(
        profiles=[
            Profile(name=name, description=planner.describe_profile(name))
            for name in planner.profile_names()
        ],
        default_profile=planner.DEFAULT_PROFILE,
    )


def suggest(request: SuggestRequest, nbytes: int, snapshot: Snapshot | None) -> SuggestionInfo:
    """The planner's suggestion for ``nbytes``; ``snapshot``'s workers say which can run it."""
    from taskcell import planner

    workers = snapshot["workers"] if snapshot is not None else []
    try:
        return planner.suggest(nbytes, request.profile, workers).to_dict()
    except (ValueError, OverflowError) as e:  # a SpecError, or a size the planner cannot show
        raise RequestError(str(e)) from None
