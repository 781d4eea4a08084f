"""``spec/devices.yaml``, the one table of devices, against the code that reads it.

Every device is written by each export target in its own spelling or refused with an error
naming it (the targets' own code, not a copy of the table), every product a device lists is
detected as that device and no other, and the table agrees with Latch's GPU presets.
"""

from __future__ import annotations

import re
import warnings

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from taskcell.cluster.detect import canonical_gpu_name
from taskcell.export import ExportError, ExportWarning, export_notebook
from taskcell.export.flyte_target import flyte_resources
from taskcell.spec import BUILTIN_PRESETS, GPU, TPU, Device, Resources, format_gpu
from taskcell.spec.devices import DEVICES, device_key, parse_gpu

PRODUCTS = [(name, p) for name, device in DEVICES.items() for p in device.products]


def one_of(name: str) -> Resources:
    """A request for one of the device ``name`` (a TPU slice of any topology)."""
    device = DEVICES[name]
    if device.device_class == "TPU":
        return Resources(gpu=TPU(name))
    return Resources(gpu=Device(1, device.device_class, name))


def latch_source(request: Resources) -> str:
    """The latch target's module for one cell asking for ``request``."""
    nb = new_notebook(cells=[new_code_cell(f"%%task {request.to_options()}\nx = 1")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        return export_notebook(nb, "latch")


@pytest.mark.parametrize("name", DEVICES)
def test_every_device_is_written_in_flyte_or_refused_by_name(name: str) -> None:
    device = DEVICES[name]
    try:
        written = flyte_resources(one_of(name), "flyte", "cell", [])["gpu"]
    except ExportError as error:
        assert name in str(error)
        return
    if device.flyte_counts:
        assert written == repr(f"{device.flyte_name}:1")
    else:
        assert written == f"flyte.TPU(device={device.flyte_name!r})"


@pytest.mark.parametrize("name", DEVICES)
def test_every_device_is_written_in_latch_or_refused_by_name(name: str) -> None:
    device = DEVICES[name]
    if not device.latch:
        with pytest.raises(ExportError, match=re.escape(name)):
            latch_source(one_of(name))
        return
    assert f"@_{device.latch[0]}\n" in latch_source(one_of(name))


@pytest.mark.parametrize("name", [n for n, d in DEVICES.items() if d.flyte_mig])
def test_every_flyte_mig_partition_is_a_mig_profile_flyte_writes(name: str) -> None:
    device = DEVICES[name]
    assert set(device.flyte_mig) <= set(device.mig)
    for part in device.flyte_mig:
        written = flyte_resources(Resources(gpu=GPU(name, 1, part)), "flyte", "cell", [])["gpu"]
        assert written == f"flyte.GPU(device={device.flyte_name!r}, quantity=1, partition={part!r})"


def test_the_latch_presets_hold_the_device_the_table_says() -> None:
    listed = [p for device in DEVICES.values() for p in device.latch]
    assert len(listed) == len(set(listed)), "a preset is listed under two devices"
    with_gpus = {name for name, preset in BUILTIN_PRESETS.items() if preset.gpu is not None}
    assert set(listed) == with_gpus
    for name, device in DEVICES.items():
        for preset in device.latch:
            gpu = BUILTIN_PRESETS[preset].gpu
            assert isinstance(gpu, GPU) and gpu.device in (None, name), preset


@pytest.mark.parametrize(("name", "product"), PRODUCTS, ids=[p for _, p in PRODUCTS])
def test_every_listed_product_is_detected_as_its_device_alone(name: str, product: str) -> None:
    assert canonical_gpu_name(product) == name
    others = [n for n, d in DEVICES.items() if d.product and d.product.search(product)]
    assert others == [name]


def test_every_device_with_a_product_pattern_lists_a_product_it_finds() -> None:
    for name, device in DEVICES.items():
        assert bool(device.product) == bool(device.products), name
        assert device.product is None or device.device_class == "GPU", name


def test_aliases_and_names_are_one_device_each() -> None:
    spellings = [device_key(s) for n, d in DEVICES.items() for s in (n, *d.aliases)]
    assert len(spellings) == len(set(spellings))
    for name, device in DEVICES.items():
        for alias in device.aliases:
            assert format_gpu(parse_gpu(alias)).partition(":")[0] == name
