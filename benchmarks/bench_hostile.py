"""Refusing hostile requests takes about as long as reading ordinary ones (issue 10).

``tests/spec/test_hostile.py`` checks what each hostile input is answered with, and that no
refusal builds the number it refuses; how long that takes is measured here, never asserted.
Each row times the test's own inputs (huge exponents, long digit strings, amounts past a float
on the ``%%task`` line) against the same number of ordinary requests of the same fields read
the same way in the same run: a ratio near 1 means hostile input costs no more than any other.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from taskcell.errors import SpecError
from tests.spec.test_hostile import HUGE, LONG, OVERFLOW, api, line

#: An ordinary value of each field, the baseline a hostile one is read against.
ORDINARY = {"cpu": 2, "memory": "4Gi", "disk": "4Gi", "shm": "4Gi", "gpu": 1, "extra": 1}
#: The same options as ``OVERFLOW``'s, with ordinary amounts.
ORDINARY_LINES = ["--cpu 2", "--memory 4Gi", "--disk 4Gi", "--shm 1Gi", "--resources x=1"]
REPEAT = 200


def _best(call: Callable[[], object]) -> float:
    """The fastest of :data:`REPEAT` calls, in seconds (refused or not)."""
    best = float("inf")
    for _ in range(REPEAT):
        started = time.perf_counter()
        with contextlib.suppress(SpecError):
            call()
        best = min(best, time.perf_counter() - started)
    return best


def _row(name: str, hostile: list[Callable[[], object]], ordinary: list[Callable[[], object]]):
    taskcell_s = sum(_best(call) for call in hostile)
    baseline_s = sum(_best(call) for call in ordinary)
    return {
        "benchmark": name,
        "taskcell_s": taskcell_s,
        "baseline_s": baseline_s,
        "ratio": taskcell_s / baseline_s,
        "note": f"{len(hostile)} hostile inputs against as many ordinary ones (best of {REPEAT})",
    }


def run() -> list[dict]:
    huge = [(field, value) for field, value, _ in HUGE]
    return [
        _row(
            "refuse huge exponents (Resources)",
            [api(field, value) for field, value in huge],
            [api(field, ORDINARY[field]) for field, _ in huge],
        ),
        _row(
            "refuse long digit strings (Resources)",
            [api(field, value) for field, value in LONG],
            [api(field, ORDINARY[field]) for field, _ in LONG],
        ),
        _row(
            "refuse amounts past a float (%%task line)",
            [line(text) for text in OVERFLOW],
            [line(text) for text in ORDINARY_LINES],
        ),
    ]
