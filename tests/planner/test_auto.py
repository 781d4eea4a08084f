"""``%%task auto`` learns: past peaks scaled to the input the cell reads now."""

from __future__ import annotations

import time

import numpy as np
import pytest

from taskcell.planner.auto import auto_preset, note_input, run_input, scaled_peak
from taskcell.planner.estimate import cell_input, estimate_memory
from taskcell.runner.history import TaskRecord
from taskcell.runner.job import Usage
from taskcell.spec import Resources

MiB = 1 << 20
GiB = 1 << 30
LADDER = {f"m{q}": Resources(memory=q) for q in ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")}


def run(source: str, peak: int, input_size: int | None, *, cores: float = 1.0) -> TaskRecord:
    """A finished run of ``source`` whose input size was noted when it was submitted."""
    if input_size is not None:
        note_input(source, input_size)
    r = TaskRecord(key=f"k-{time.monotonic_ns()}", cell="c", request=Resources(memory="8Gi"))
    r.source = source
    r.finish("finished", Usage(wall=5, cpu=5 * cores, peak_memory=peak))
    return r


@pytest.fixture
def source(request) -> str:
    return f"df = load(path)  # {request.node.name}"


def test_four_times_the_data_asks_about_four_times_the_memory(source):
    # The default profile's base is 160 MiB: this run used 2.4 bytes per input byte over it.
    history = [run(source, 400 * MiB, 100 * MiB)]
    choice = auto_preset(history, source=source, inputs_size=400 * MiB, presets=LADDER)
    assert choice.basis == "history"
    assert choice.memory == 160 * MiB + 4 * 240 * MiB
    assert choice.preset == "m2Gi"  # 1.09 GiB with a quarter to spare
    assert "2.40 bytes per input byte" in choice.reason and "400 MiB of input now" in choice.reason


def test_an_eighth_of_the_data_asks_far_less(source):
    history = [run(source, 1100 * MiB, 400 * MiB)]
    choice = auto_preset(history, source=source, inputs_size=50 * MiB, presets=LADDER)
    assert choice.preset == "m512Mi"  # 160 MiB + 50 MiB * 2.35, where the old rule kept 2Gi


def test_a_streaming_cell_stays_small_however_large_its_input(source):
    history = [run(source, 138 * MiB, 3 * GiB)]  # a 3 GiB checksum that peaked at 138 MiB
    choice = auto_preset(history, source=source, inputs_size=12 * GiB, presets=LADDER)
    assert choice.preset == "m256Mi"


def test_runs_of_different_sizes_fit_their_own_base_and_slope(source):
    history = [run(source, 300 * MiB, 50 * MiB), run(source, 900 * MiB, 250 * MiB)]
    choice = auto_preset(history, source=source, inputs_size=1000 * MiB, presets=LADDER)
    assert choice.memory == 150 * MiB + 3 * 1000 * MiB  # 3 bytes per byte over 150 MiB
    assert "grew 3.00 bytes per input byte over 150 MiB" in choice.reason


def test_a_past_run_of_a_pairwise_product_scales_as_its_square():
    source = "import numpy as np\nm = np.outer(v, v)"
    ns = {"v": np.zeros(9000)}  # 72 KB of input, a 618 MiB product
    estimate = estimate_memory(cell_input(source, ns))
    quarter = 2250 * 2250 * 8  # what a run on a quarter of v made: a sixteenth
    history = [run(source, estimate.least_base + quarter, 2250 * 8)]
    choice = auto_preset(history, source=source, estimate=estimate, presets=LADDER)
    assert choice.memory == pytest.approx(estimate.least_base + 16 * quarter, rel=0.01)
    assert choice.preset == "m1Gi"  # in proportion to its input: m256Mi, a third of the truth
    assert "scaled as its arrays sized by their shapes grow" in choice.reason


def test_a_larger_past_run_scales_down_no_less_than_in_proportion():
    """cdist(X, C) against fixed centroids: the shape model grows C with X's rows too, so
    from a run on twice the rows it would ask for less than the cell needs now."""
    source = "from scipy.spatial.distance import cdist\nd = cdist(X, C)"
    centroids = np.zeros((2000, 8))
    past = estimate_memory(cell_input(source, {"X": np.zeros((40000, 8)), "C": centroids}))
    now = estimate_memory(cell_input(source, {"X": np.zeros((20000, 8)), "C": centroids}))
    history = [run(source, past.memory, past.size)]  # it peaked as the estimate said
    choice = auto_preset(history, source=source, estimate=now)
    assert choice.memory >= now.memory  # the product now is half the past one, not a quarter


def test_scaling_up_counts_the_least_base_and_scaling_down_the_planners():
    source = "import numpy as np\ny = np.sort(x)"
    estimate = estimate_memory(cell_input(source, {"x": np.zeros(100 * MiB // 8)}))
    assert estimate.base - estimate.least_base == 16 * MiB  # a cell loop's floor over python's
    grew = 100 * MiB  # over the least base, from 25 MiB of input: 4 bytes per byte
    up = auto_preset(
        [run(source, estimate.least_base + grew, 25 * MiB)], source=source, estimate=estimate
    )
    assert up.memory == estimate.least_base + 4 * grew  # the planner's base would lose 48 MiB
    down = auto_preset(
        [run(source + "#", estimate.base + 4 * grew, 400 * MiB)],
        source=source + "#",
        estimate=estimate,
    )
    assert down.memory == estimate.base + grew  # the larger base: a quarter of the rest


def test_runs_too_small_to_show_growth_take_the_planners_factor():
    need, how = scaled_peak([(1 * MiB, 130 * MiB)], 1000 * MiB, base=150 * MiB, per_byte=4)
    assert need == 130 * MiB + 4 * 999 * MiB
    assert "too little to show how it grows" in how


def test_without_input_sizes_the_highest_peak_holds(source):
    r = TaskRecord(key="old", cell="c", request=Resources(memory="8Gi"), source="other")
    r.finish("finished", Usage(wall=5, cpu=5, peak_memory=700 * MiB))
    choice = auto_preset([r], name="c", inputs_size=400 * MiB, presets=LADDER)
    assert choice.memory == 700 * MiB and choice.preset == "m1Gi"
    assert "1 past run of this cell peaked at 700 MiB" in choice.reason


def test_a_records_input_is_the_size_noted_last_before_it_was_submitted(source):
    note_input(source, 10, when=time.time() - 60)
    early = TaskRecord(key="a", cell="c", request=Resources(), source=source)
    note_input(source, 20)
    late = TaskRecord(key="b", cell="c", request=Resources(), source=source)
    assert (run_input(early), run_input(late)) == (10, 20)
    before = TaskRecord(key="z", cell="c", request=Resources(), source="never noted")
    assert run_input(before) is None


def test_failed_and_unmeasured_runs_teach_nothing(source):
    failed = run(source, 8 * GiB, 100 * MiB)
    failed.state = "error"
    unmeasured = run(source, 0, 100 * MiB)
    unmeasured.usage = Usage(wall=5, cpu=5, peak_memory=None)  # type: ignore[arg-type]
    choice = auto_preset([failed, unmeasured], source=source, inputs_size="1 GiB", presets=LADDER)
    assert choice.basis == "planner"
