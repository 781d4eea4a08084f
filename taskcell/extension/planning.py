"""``/taskcell/api/planner``: the planner's suggestion for a size and a profile, as JSON.

Validates what a browser sends (a careless or hostile body gets a message naming the field),
then asks :mod:`taskcell.planner` with the live workers of the cluster the sidebar shows.

The size must be a quantity (``"12 GiB"``, ``500e6``) or a number of bytes. The planner itself
also reads file paths and globs, summing the files' sizes; a browser is not allowed that,
since it would let any page with a token walk the server's disk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from taskcell.extension.payloads import shown
from taskcell.planner.schema import Snapshot, SuggestionInfo

#: Longest size string accepted; a quantity such as "12 GiB" is a dozen characters.
MAX_TEXT = 200

#: Largest size accepted, in bytes: 4 EiB, far more than any cluster holds. A bound of our own,
#: so the planner never works with a number as large as a browser may send (``1e308``).
MAX_SIZE = 2**62

_FORMS = 'a quantity such as "12 GiB", "500M" or 500e6'


class RequestError(ValueError):
    """A planner request the server cannot answer: the message says which field and why."""


@dataclass(frozen=True)
class SuggestRequest:
    """A checked ``POST /taskcell/api/planner`` body."""

    size: int
    profile: str
    cluster: str | None


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
    """Check a request body: ``size`` (a quantity or a number of bytes), ``profile``, and
    optionally ``cluster`` (an id from ``GET /taskcell/api/clusters``)."""
    unknown = sorted(set(data) - {"size", "profile", "cluster"})
    if unknown:
        raise RequestError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; "
            "the planner takes 'size', 'profile' and 'cluster'"
        )
    size = data.get("size")
    if isinstance(size, bool) or not isinstance(size, (str, int, float)):
        raise RequestError(f"'size' must be {_FORMS} or a number of bytes, got {shown(size)}")
    if isinstance(size, str):
        nbytes = _quantity(_text(data, "size", True) or "")
    elif not 0 <= size < math.inf:
        raise RequestError(
            f"'size' must be a finite, non-negative number of bytes, got {shown(size)}"
        )
    else:
        nbytes = int(size)
    if nbytes > MAX_SIZE:
        raise RequestError(f"'size' must be at most {MAX_SIZE} bytes (4 EiB), got {shown(size)}")
    profile = _text(data, "profile", False) or default_profile()
    cluster = _text(data, "cluster", False)
    return SuggestRequest(size=nbytes, profile=profile, cluster=cluster)


def _quantity(text: str) -> int:
    from taskcell.errors import SpecError
    from taskcell.spec import parse_quantity

    if text in ("0", "0B"):
        return 0
    try:
        return parse_quantity(text, "size")
    except (SpecError, ValueError, OverflowError):
        raise RequestError(f"'size' must be {_FORMS}, got {shown(text)}") from None


def default_profile() -> str:
    from taskcell import planner

    return planner.DEFAULT_PROFILE


def choices() -> dict[str, Any]:
    """The profiles the form offers (name and description), and the default one."""
    from taskcell import planner

    return {
        "profiles": [
            {"name": name, "description": planner.describe_profile(name)}
            for name in planner.profile_names()
        ],
        "default_profile": planner.DEFAULT_PROFILE,
    }


def suggest(request: SuggestRequest, snapshot: Snapshot | None) -> SuggestionInfo:
    """The planner's suggestion; ``snapshot``'s workers say which can run it."""
    from taskcell import planner

    workers = snapshot["workers"] if snapshot is not None else []
    try:
        return planner.suggest(request.size, request.profile, workers).to_dict()
    except (ValueError, OverflowError) as e:  # a SpecError, or a size the planner cannot show
        raise RequestError(str(e)) from None
