"""The request -> Dask resources table, and the feasibility verdict, on given workers."""

from __future__ import annotations

import pytest

from taskcell.cluster.feasibility import check_feasible
from taskcell.cluster.mapping import WorkerCapacity, dask_resources, wanted
from taskcell.errors import InfeasibleError
from taskcell.spec import GPU, TPU, Device, Resources

GIB = 2**30


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (Resources(cpu="500m"), {"CPU": 0.5}),
        (Resources(memory="4Gi"), {"MEMORY": 4 * GIB}),
        (Resources(memory=100e9), {"MEMORY": 100e9}),
        (Resources(memory=("1Gi", "4Gi")), {"MEMORY": GIB}),
        (Resources(disk="50Gi", shm="8Gi"), {"DISK": 50 * GIB, "SHM": 8 * GIB}),
        (Resources(shm="auto"), {}),
        (Resources(gpu=2), {"GPU": 2}),
        (Resources(gpu="A100:2"), {"GPU": 2, "GPU-A100": 2}),
        (Resources(gpu="A100 80G:1"), {"GPU": 1, "GPU-A100-80G": 1}),
        (Resources(gpu=GPU("A100", 1, "1g.5gb")), {"MIG-A100-1g.5gb": 1}),
        (Resources(gpu=TPU("V5P", "2x2x1")), {"TPU-V5P-2x2x1": 1}),
        (
            Resources(gpu=Device(2, "GPU", "custom_accelerator", "large")),
            {"DEVICE-custom_accelerator-large": 2},
        ),
        (Resources(extra={"process": 1}), {"process": 1}),
    ],
    ids=[
        "millicores",
        "memory",
        "memory-e-notation",
        "memory-request-of-range",
        "disk-shm",
        "shm-auto",
        "gpu-count",
        "gpu-typed",
        "gpu-a100-80g",
        "mig",
        "tpu",
        "device",
        "extra",
    ],
)
def test_mapping_table(request_, expected):
    assert wanted(request_) == expected


def worker(address, nthreads=2, memory=8 * GIB, **resources):
    return WorkerCapacity(
        address=address,
        name=address,
        nthreads=nthreads,
        memory_limit=memory,
        resources=resources,
    )


def test_names_follow_the_spelling_workers_advertise():
    lower = worker("tcp://a", gpu=2)
    assert dask_resources(Resources(gpu=1), [lower]) == {"gpu": 1}


def test_cpu_and_memory_reserved_only_where_advertised():
    plain = worker("tcp://plain")
    assert dask_resources(Resources(cpu=1, memory="1Gi"), [plain]) == {}
    big = worker("tcp://big", MEMORY=100e9)
    assert dask_resources(Resources(cpu=1, memory="1Gi"), [plain, big]) == {"MEMORY": GIB}


def test_feasible_workers_are_those_that_have_enough():
    a, b = worker("tcp://a", GPU=2), worker("tcp://b", GPU=1)
    request = Resources(gpu=2)
    assert check_feasible(request, dask_resources(request, [a, b]), [a, b]) == [a]


def test_infeasible_names_the_shortfall_and_the_best_worker():
    a, b = worker("tcp://a", GPU=1, **{"GPU-A100": 1}), worker("tcp://b", GPU=2)
    request = Resources(gpu="A100:2")
    with pytest.raises(InfeasibleError) as e:
        check_feasible(request, dask_resources(request, [a, b]), [a, b])
    message = str(e.value)
    assert "asks GPU-A100=2; the most any worker has is 1, on tcp://a" in message
    assert "Nothing was submitted" in message


def test_native_capacity_bounds_unreserved_requests():
    small = worker("tcp://small", nthreads=2, memory=4 * GIB)
    request = Resources(cpu=8, memory="16Gi")
    with pytest.raises(InfeasibleError, match=r"asks threads=8; .* has is 2.*memory limit=16 GiB"):
        check_feasible(request, dask_resources(request, [small]), [small])


def test_cpu_reserved_in_another_case_is_not_bounded_by_threads():
    lower = worker("tcp://env", nthreads=2, cpu=8)  # DASK_..._RESOURCES__CPU=8 advertises cpu
    request = Resources(cpu=8)
    assert check_feasible(request, dask_resources(request, [lower]), [lower]) == [lower]


def test_no_workers_is_infeasible_with_a_hint():
    with pytest.raises(InfeasibleError, match="taskcell worker"):
        check_feasible(Resources(cpu=1), {}, [])
