"""The decorator API (Latch and Flyte spellings) submitting to real worker processes."""

from __future__ import annotations

import pytest
from distributed import Client

import taskcell
from taskcell import Resources, TaskEnvironment, custom_task, small_task, task
from taskcell.errors import SpecError
from taskcell.spec import ResourceTemplate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(module_dask):
    module_dask.worker(
        "--nthreads", "2", "--resources", "GPU=2,CPU=2,MEMORY=8e9,DISK=100e9", name="box"
    )
    with Client(module_dask.address) as c:
        c.wait_for_workers(1, timeout=60)
        yield c


def test_latch_preset_decorator_runs_where_it_fits(client):
    @small_task
    def double(x):
        return 2 * x

    assert double.request(1) == Resources(cpu=2, memory="4Gi")
    assert double(21).result(timeout=30) == 42


def test_every_call_gets_a_unique_key(client):
    @task
    def same():
        return 1

    assert same().key != same().key


def test_custom_task_with_dynamic_resources(client):
    def allocate_cpu(files, **kwargs):
        return min(2, len(files))

    def allocate_storage(files, **kwargs):
        return 10 * len(files)

    @custom_task(cpu=allocate_cpu, memory=1, storage_gib=allocate_storage)
    def count(files, sep=","):
        return len(files)

    assert count.request(["a", "b", "c"]) == Resources(cpu=2, memory="1Gi", disk="30Gi")
    assert count(["a", "b", "c"]).result(timeout=30) == 3


def test_dynamic_resource_naming_an_unknown_parameter_is_refused_at_definition():
    def allocate_cpu(samples):
        return 1

    with pytest.raises(SpecError, match="samples"):

        @custom_task(cpu=allocate_cpu, memory=1)
        def count(files):
            return len(files)


def test_task_environment_override_is_field_by_field(client):
    env = TaskEnvironment("train", resources=Resources(cpu=1, memory="1Gi", gpu=1))

    @env.task
    def plain():
        import os

        return os.environ.get("CUDA_VISIBLE_DEVICES")

    @env.task(resources=Resources(memory="2Gi"))
    def bigger():
        return "ok"

    assert plain.resources == Resources(cpu=1, memory="1Gi", gpu=1)
    assert bigger.resources == Resources(cpu=1, memory="2Gi", gpu=1)
    assert bigger().result(timeout=30) == "ok"
    assert env.override(memory="4Gi").resources == Resources(cpu=1, memory="4Gi", gpu=1)


def test_task_override_replaces_the_whole_request_as_in_flyte(client):
    env = TaskEnvironment("train", resources=Resources(cpu=1, memory="1Gi", gpu=1))

    @env.task
    def fit(x):
        return x + 1

    bigger = fit.override(resources=Resources(memory="2Gi"))
    assert bigger.resources == Resources(memory="2Gi")  # not cpu=1, gpu=1: Flyte's reading
    assert fit.resources == Resources(cpu=1, memory="1Gi", gpu=1)  # unchanged
    assert bigger(1).result(timeout=30) == 2
    retried = fit.override(retries=2)
    assert (retried.retries, retried.resources, retried.name) == (2, fit.resources, "fit")

    def allocate_cpu(samples):
        return 1

    with pytest.raises(SpecError, match="'samples'"):
        fit.override(resources=ResourceTemplate(cpu=allocate_cpu))
    with pytest.raises(SpecError, match=r"Resources or a ResourceTemplate, got \{'cpu': 1\}"):
        fit.override(resources={"cpu": 1})


def test_presets_frame_lists_the_latch_catalogue():
    frame = taskcell.presets()
    row = frame.set_index("preset").loc["g6e_24xlarge_task"]
    assert (row["cpu"], row["memory"], row["gpu"]) == ("96", "768Gi", "L40s:4")


@pytest.mark.parametrize(
    "retries", [-1, 10**9, "x", 1.5], ids=["negative", "huge", "text", "float"]
)
def test_bad_retries_are_refused_where_they_are_written(retries):
    with pytest.raises(SpecError, match="retries="):
        custom_task(cpu=1, memory=2, retries=retries)
    with pytest.raises(SpecError, match="retries="):
        taskcell.task(lambda x: x, retries=retries)
