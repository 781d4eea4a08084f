"""A cell that failed for memory: recognised from what the runner knows, and one rung up."""

from __future__ import annotations

import pytest

from taskcell.planner import escalate, memory_failure
from taskcell.spec import BUILTIN_PRESETS, Resources

GiB = 1 << 30
LADDER = {f"m{q}": Resources(memory=q) for q in ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")}
NUMPY = (
    'Traceback (most recent call last):\n  File "<cell In[3]>", line 2, in <module>\n'
    "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 3.73 GiB for an array with "
    "shape (500000000,) and data type float64"
)


@pytest.mark.parametrize(
    ("type_name", "text", "exit_code", "how", "wanted"),
    [
        ("MemoryError", "MemoryError\n", None, "error", None),
        ("_ArrayMemoryError", NUMPY, None, "error", round(3.73 * GiB)),
        ("ArrowMemoryError", "malloc of size 2147483648 failed", None, "error", 2 * GiB),
        (None, "std::bad_alloc", None, "error", None),
        ("OSError", "[Errno 12] Cannot allocate memory", None, "error", None),
        (None, "Worker tcp://127.0.0.1:4000 (pid=12) exceeded 95% memory budget. Restarting...",
         None, "worker", None),
        (None, "the process running the cell on tcp://127.0.0.1:4000 died (exit code -9)", -9,
         "killed", None),
        (None, "", 137, "killed", None),
    ],
    ids=["MemoryError", "numpy", "pyarrow", "bad_alloc", "ENOMEM", "nanny", "sigkill", "shell-137"],
)  # fmt: skip
def test_memory_failures_are_recognised(type_name, text, exit_code, how, wanted):
    failure = memory_failure(type_name, text, exit_code)
    assert failure is not None
    assert (failure.how, failure.wanted) == (how, wanted)


@pytest.mark.parametrize(
    ("type_name", "text", "exit_code", "forced"),
    [
        ("ValueError", "bad batch", None, False),
        ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", None, False),
        ("RuntimeError", "CUDA error: out of memory", None, False),
        (None, "the cell went on after the interrupt and was ended with SIGKILL", -9, True),
        (None, "died", 1, False),
        (None, None, None, False),
    ],
    ids=["other-error", "gpu-oom", "cuda-error", "taskcell-killed-it", "exit-1", "nothing"],
)
def test_other_failures_are_not_memory(type_name, text, exit_code, forced):
    assert memory_failure(type_name, text, exit_code, forced=forced) is None


def test_one_rung_up_the_ladder_keeping_cores():
    killed = memory_failure(exit_code=-9)
    step = escalate(Resources(cpu=1, memory="1Gi"), killed, presets=LADDER)
    assert (step.preset, step.memory) == ("m2Gi", 2 * GiB)
    assert step.request == Resources(cpu=1, memory="2Gi")
    assert "attempt 1 ran out of memory with 1 GiB" in step.message
    assert "m2Gi's 2 GiB is the next rung up" in step.message
    second = escalate(step.request, killed, attempt=2, presets=LADDER)
    assert second.preset == "m4Gi" and second.message.startswith("attempt 2 ")


def test_an_allocation_that_says_its_size_jumps_to_the_rung_that_holds_it():
    step = escalate(
        Resources(memory="1Gi"), memory_failure("_ArrayMemoryError", NUMPY), presets=LADDER
    )
    # 1 GiB held plus 3.73 GiB wanted, with a quarter to spare: 5.9 GiB, the 8 GiB rung.
    assert step.preset == "m8Gi"
    # The message states the margin, so the rung it names is the one it asks for.
    assert "it needs at least 4.73 GiB (the 1 GiB it had and the 3.73 GiB" in step.message
    assert "with 25% to spare that is 5.91 GiB: m8Gi's 8 GiB" in step.message


def test_what_the_worker_had_counts_when_it_had_less_than_asked():
    failure = memory_failure("_ArrayMemoryError", "Unable to allocate 1.50 GiB for an array")
    step = escalate(Resources(memory="4Gi"), failure, held=GiB, presets=LADDER)
    # It ran with 1 GiB (its worker's limit), not the 4 GiB asked: 2.5 GiB needs the 4 GiB
    # rung again, not 8 GiB.
    assert step.preset == "m4Gi" and "with 1 GiB" in step.message


def test_a_peak_the_runner_measured_sets_the_rung():
    text = "MemoryError: the cell peaked at 1.54 GiB, over its 512 MiB memory limit"
    step = escalate(Resources(memory="512Mi"), memory_failure("MemoryError", text), presets=LADDER)
    assert step.preset == "m2Gi" and "1.54 GiB (its measured peak)" in step.message


def test_past_the_top_rung_the_memory_doubles():
    step = escalate(Resources(memory="8Gi"), memory_failure("MemoryError"), presets=LADDER)
    assert (step.preset, step.request, step.memory) == (None, Resources(memory="16Gi"), 16 * GiB)
    assert "--memory 16Gi is the next rung up" in step.message


def test_gpus_and_cores_are_kept_on_the_way_up():
    gpu = Resources(cpu=8, memory="32Gi", gpu="L40s:1")
    step = escalate(gpu, memory_failure(exit_code=137), presets=BUILTIN_PRESETS)
    assert step.preset == "g6e_2xlarge_task"  # the next L40s preset, with more memory
    assert step.request == gpu.override(Resources(memory=step.memory))


def test_a_request_without_memory_climbs_from_what_its_worker_had():
    step = escalate(Resources(cpu=1), memory_failure("MemoryError"), held=2 * GiB, presets=LADDER)
    assert step.preset == "m4Gi"
    assert "with 2 GiB" in step.message
