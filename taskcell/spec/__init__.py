"""The resource language: what a task asks for, parsed, checked and spelled one way.

Pure Python; imports neither Dask nor IPython. Every layer of taskcell (the magic, the
decorator API, the panel, the sidebar, the exporter) takes its requests from here.
"""

from __future__ import annotations

from taskcell.errors import LimitError, SpecError
from taskcell.spec.cpu import format_cpu, parse_cpu
from taskcell.spec.devices import (
    ACCELERATORS,
    AMD_GPU,
    APPLE_SILICON,
    DEVICE_CLASSES,
    GPU,
    HABANA_GAUDI,
    KNOWN_GPUS,
    MIG_PROFILES,
    TPU,
    TPU_TOPOLOGIES,
    Accelerator,
    Device,
    DeviceClass,
    Neuron,
    format_gpu,
    parse_gpu,
)
from taskcell.spec.dynamic import Expression, ResourceTemplate, latch_custom
from taskcell.spec.environment import Environment
from taskcell.spec.limits import LATCH, PROFILES, PlatformLimits, check_limits
from taskcell.spec.presets import (
    BUILTIN_PRESETS,
    catalogue,
    get_preset,
    load_user_presets,
    presets_frame,
)
from taskcell.spec.quantity import format_quantity, parse_quantity
from taskcell.spec.ranges import Range
from taskcell.spec.resources import (
    FIELDS,
    RANGED_FIELDS,
    REQUEST_FIELDS,
    Resources,
    meets,
    resource_key,
)
from taskcell.spec.retries import MAX_RETRIES, parse_retries

__all__ = [
    "ACCELERATORS",
    "AMD_GPU",
    "APPLE_SILICON",
    "BUILTIN_PRESETS",
    "DEVICE_CLASSES",
    "FIELDS",
    "GPU",
    "HABANA_GAUDI",
    "KNOWN_GPUS",
    "LATCH",
    "MAX_RETRIES",
    "MIG_PROFILES",
    "PROFILES",
    "RANGED_FIELDS",
    "REQUEST_FIELDS",
    "TPU",
    "TPU_TOPOLOGIES",
    "Accelerator",
    "Device",
    "DeviceClass",
    "Environment",
    "Expression",
    "LimitError",
    "Neuron",
    "PlatformLimits",
    "Range",
    "ResourceTemplate",
    "Resources",
    "SpecError",
    "catalogue",
    "check_limits",
    "format_cpu",
    "format_gpu",
    "format_quantity",
    "get_preset",
    "latch_custom",
    "load_user_presets",
    "meets",
    "parse_cpu",
    "parse_gpu",
    "parse_quantity",
    "parse_retries",
    "presets_frame",
    "resource_key",
]
