"""Dask resource names: one case rule (``resource_key``) and one ``meets(shape, request)``."""

from __future__ import annotations

import pytest

from taskcell.spec.resources import meets, resource_key


def test_resource_names_are_one_resource_in_any_case() -> None:
    assert resource_key("gpu") == resource_key("GPU") != resource_key("GPU-A100")


@pytest.mark.parametrize(
    ("shape", "request_", "met"),
    [
        ({"GPU": 2, "MEMORY": 8e9}, {"GPU": 2}, True),
        ({"gpu": 2}, {"GPU": 1}, True),
        ({"GPU": 1}, {"GPU": 2}, False),
        ({"GPU": 1}, {"GPU": 1, "GPU-A100": 1}, False),
        ({}, {}, True),
    ],
)
def test_meets_compares_every_asked_resource(shape, request_, met) -> None:
    assert meets(shape, request_) is met
