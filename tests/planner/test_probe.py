"""``%%task auto --probe``, its pure parts: what it samples and refuses, how it extrapolates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taskcell.errors import SpecError
from taskcell.planner.auto import AutoChoice, auto_preset, from_probe
from taskcell.planner.estimate import FLOOR, cell_input, estimate_memory
from taskcell.planner.probe import (
    GROWN,
    NOISE,
    SAMPLE_CAP,
    Probed,
    effects,
    extrapolate,
    plan_probe,
    probe,
    probe_request,
)
from taskcell.runner.task_line import parse_task_line
from taskcell.spec import Resources

MiB = 1 << 20
GiB = 1 << 30
BASE = 60 * MiB
LADDER = {f"m{q}": Resources(memory=q) for q in ("256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi")}


def test_memory_in_proportion_to_the_input_extrapolates_by_its_slope():
    points = [(s * MiB, BASE + 3 * s * MiB) for s in (2, 4, 8)]
    growth = extrapolate(points, 1024 * MiB)
    assert growth.power == 1
    assert growth.per_byte == pytest.approx(3.0)
    assert growth.peak == pytest.approx(BASE + 3 * GiB, rel=1e-6)
    assert "about 3.0x per input byte, 3.06 GiB at full size" in growth.describe()


def test_memory_that_grows_as_the_square_extrapolates_as_the_square():
    full = 256 * 1024  # a pairwise product of 256 KiB of rows: a GiB of pairs at full size
    points = [(x, BASE + int(GiB * (x / full) ** 2)) for x in (full // 16, full // 8, full // 4)]
    growth = extrapolate(points, full)
    assert growth.power == 2
    assert growth.measured_power == pytest.approx(2.0, abs=0.01)
    assert growth.peak == pytest.approx(BASE + GiB, rel=1e-6)
    # A straight line through the same probes would have asked for a quarter of it.
    assert "growing as its square (measured 2.00)" in growth.describe()


def test_a_power_between_two_counts_as_the_higher():
    full = 1 << 30
    sizes = (full // 64, full // 32, full // 16)
    points = [(x, BASE + int(16 * GiB * (x / full) ** 1.6)) for x in sizes]
    assert extrapolate(points, full).power == 2


def test_growth_within_the_noise_is_taken_as_in_proportion_never_under_the_largest_probe():
    points = [(1 * MiB, BASE + NOISE // 2), (2 * MiB, BASE), (4 * MiB, BASE + NOISE // 4)]
    growth = extrapolate(points, 64 * MiB)
    assert growth.power == 1 and growth.measured_power is None
    assert growth.peak >= BASE + NOISE // 4
    flat = extrapolate([(1 * MiB, 10 * MiB), (2 * MiB, 10 * MiB)], 64 * MiB)
    assert flat.peak == FLOOR  # never under an interpreter's floor


def test_extrapolation_needs_two_sizes():
    with pytest.raises(ValueError, match="two sizes"):
        extrapolate([(MiB, BASE), (MiB, BASE)], 64 * MiB)


def test_the_choice_holds_the_extrapolated_peak_with_room():
    choice = from_probe(700 * MiB, "probed on 1/8, 1/4 and 1/2 of x: ...", presets=LADDER)
    assert (choice.basis, choice.preset, choice.memory) == ("probe", "m1Gi", 700 * MiB)
    assert (
        choice.reason == "probed on 1/8, 1/4 and 1/2 of x: ...; m1Gi holds that with 25% to spare"
    )
    choice = from_probe(900 * MiB, "probed", presets=LADDER)
    assert choice.preset == "m2Gi"  # 900 MiB and a quarter is over 1 GiB


def static_choice(cell: str, ns: dict) -> AutoChoice:
    """What auto chooses for ``cell`` without a probe: the planner's estimate at full size."""
    return auto_preset([], estimate=estimate_memory(cell_input(cell, ns)), presets=LADDER)


def test_a_probe_asks_for_what_its_largest_sample_needs_not_the_whole_input():
    ns = {"x": np.zeros((1 << 21, 64))}  # 1 GiB, never touched: its pages are never written
    cell = "y = (x - x.mean()) / x.std()"
    plan = plan_probe(cell, ns)
    static = static_choice(cell, ns)
    assert static.preset == "m4Gi"  # the input, two temporaries of its size and room
    asked = probe_request(plan, static, cell, ns, presets=LADDER)
    assert asked == LADDER["m512Mi"]  # the largest sample, 1/16 of x: 64 MiB and its copies
    largest = {"x": ns["x"][: (1 << 21) // plan.fractions[-1]]}
    assert asked == static_choice(cell, largest).request  # auto's rule, on the sample


def test_a_probe_never_asks_for_more_than_auto_without_it():
    ns = {"x": np.zeros((1 << 21, 64))}  # its largest sample's estimate wants m512Mi
    cell = "y = (x - x.mean()) / x.std()"
    plan = plan_probe(cell, ns)
    learned = AutoChoice(preset="m256Mi", request=LADDER["m256Mi"], basis="history", reason="")
    # Past runs found the whole input holds in 256 MiB: its samples do too.
    assert probe_request(plan, learned, cell, ns, presets=LADDER) == LADDER["m256Mi"]


def test_a_probe_keeps_the_gpu_and_cores_of_the_choice_it_shrinks():
    ns = {"x": np.zeros((1 << 21, 64))}
    cell = "y = (x - x.mean()) / x.std()"
    past = Resources(cpu=4, memory="32Gi", gpu="L40s:1")  # what a past run on a GPU needed
    learned = AutoChoice(preset=None, request=past, basis="history", reason="")
    asked = probe_request(plan_probe(cell, ns), learned, cell, ns, presets=LADDER)
    assert asked == Resources(cpu=4, memory=LADDER["m512Mi"].memory, gpu="L40s:1")


def test_where_the_platform_takes_nothing_for_the_whole_input_a_probe_asks_for_its_sample():
    ns = {"x": np.zeros((1 << 21, 64))}
    cell = "y = (x - x.mean()) / x.std()"
    unsized = SpecError("--preset auto: the platform takes no such request")
    assert (
        probe_request(plan_probe(cell, ns), unsized, cell, ns, presets=LADDER) == LADDER["m512Mi"]
    )


@pytest.mark.parametrize(
    ("cell", "effect"),
    [
        ("df.to_csv('out.csv')", "writes a file (df.to_csv)"),
        ("df.to_parquet(path=p)", "writes a file (df.to_parquet)"),
        ("np.save('a.npy', x)", "writes a file (np.save)"),
        ("with open('log.txt', 'a') as f:\n    f.write('x')", "writes a file (open(..., 'a'))"),
        ("plt.savefig('fig.png')", "writes a file (plt.savefig)"),
        ("os.remove(p)", "acts outside its process (os.remove)"),
        ("subprocess.run(['ls'])", "acts outside its process (subprocess.run)"),
        ("import pickle\npickle.dump(x, f)", "writes a file (pickle.dump)"),
    ],
)
def test_effects_outside_the_cell_names_the_call(cell, effect):
    assert effects(cell) == [effect]


@pytest.mark.parametrize(
    "cell",
    [
        "s = df.to_csv()",  # returns the text
        "t = open(p).read()",
        "t = open(p, 'rb').read()",
        "j = json.dumps(x)",
        "y = x.mean()",
    ],
)
def test_reading_and_computing_have_no_effect(cell):
    assert effects(cell) == []


def test_a_cell_that_writes_is_refused_by_name_before_anything_runs():
    ns = {"x": np.zeros(100_000)}
    with pytest.raises(SpecError) as e:
        plan_probe("y = x * 2\nnp.save('y.npy', y)", ns)
    message = str(e.value)
    assert message.startswith("%%task auto --probe: the cell writes a file (np.save)")
    assert "nothing ran" in message


def test_a_shell_command_is_refused():
    cell = "get_ipython().system('rm -rf out')\ny = x * 2"
    with pytest.raises(SpecError, match=r"runs !"):
        plan_probe(cell, {"x": np.zeros(100_000)})


def test_a_cell_without_a_sliceable_input_is_refused_naming_each_input_and_why():
    ns = {"k": 3, "small": list(range(10)), "table": {i: i for i in range(50_000)}}
    with pytest.raises(SpecError) as e:
        plan_probe("y = [k * v for v in small] + list(table)", ns)
    message = str(e.value)
    assert "no input a probe can sample" in message
    assert "small (list) holds" in message and "under the 64 KiB a probe samples" in message
    assert "table (dict) is not a DataFrame, Series, array or list" in message
    assert "k (int) is not a DataFrame, Series, array or list" in message
    with pytest.raises(SpecError, match="it reads no notebook value"):
        plan_probe("y = 1", {})


def test_a_plan_samples_the_large_inputs_at_doubling_fractions_up_to_a_half():
    ns = {
        "x": np.zeros((10_000, 8)),
        "df": pd.DataFrame({"a": np.arange(10_000)}),
        "lookup": list(range(10)),
    }
    plan = plan_probe("y = f(x, df, lookup)", ns)
    assert [s.name for s in plan.sliced] == ["x", "df"]
    assert plan.fractions == (64, 32, 16, 8, 4, 2)
    big = {"x": np.zeros((1 << 21, 64))}  # 1 GiB: the largest sample is capped
    plan = plan_probe("y = x.sum()", big)
    assert plan.fractions == (512, 256, 128, 64, 32, 16)
    assert plan.size / plan.fractions[-1] <= SAMPLE_CAP
    few = {"x": np.zeros((20, 1 << 14))}  # 20 rows: each sample keeps a row at least
    assert plan_probe("y = x.sum()", few).fractions == (16, 8, 4, 2)


def test_a_probe_runs_on_samples_and_leaves_the_namespace_as_it_was():
    x = np.arange(64_000, dtype=float)
    df = pd.DataFrame({"a": np.arange(20_000)})
    ns = {"x": x, "df": df, "k": 2}
    before = dict(ns)
    plan = plan_probe("y = x * k\nz = df.a.sum()", ns)
    seen = []

    def run(namespace, label):  # stands in for the cell run as a task: memory of 3x its input
        seen.append((len(namespace["x"]), len(namespace["df"]), namespace["k"], label))
        namespace["y"] = "bound by the cell"
        return BASE + 3 * (namespace["x"].nbytes + namespace["df"].memory_usage().sum())

    found = probe(plan, ns, run)
    assert isinstance(found, Probed)
    assert [s[0] for s in seen] == [1000, 2000, 4000, 8000, 16000, 32000]
    assert [s[1:3] for s in seen[-3:]] == [(2500, 2), (5000, 2), (10000, 2)]
    assert seen[0][3] == "1/64 of x, df"
    assert found.reason.startswith("probed on 1/8, 1/4 and 1/2 of x, df: about 3.0x")
    assert ns == before and all(ns[n] is before[n] for n in ns)
    assert len(x) == 64_000 and len(df) == 20_000


def test_a_probe_that_fails_says_so_in_one_line():
    ns = {"x": np.zeros(100_000)}
    plan = plan_probe("assert len(x) == 100_000", ns)

    def run(namespace, label):
        raise AssertionError("needs the full data\nand more lines")

    failed = probe(plan, ns, run)
    assert failed == "the probe on 1/64 of x failed (AssertionError: needs the full data)"
    unmeasured = probe(plan, ns, lambda namespace, label: None)
    assert unmeasured == "the cell's process cannot measure its own peak here, so a probe cannot"


def test_a_probe_stops_once_its_samples_grew_over_the_noise():
    ns = {"x": np.zeros(1 << 20)}  # 8 MiB
    plan = plan_probe("y = f(x)", ns)
    seen = []

    def run(namespace, label):  # 256 bytes of memory per input byte: a 1 MiB sample is 256 MiB
        seen.append(label)
        return BASE + 256 * namespace["x"].nbytes

    found = probe(plan, ns, run)
    assert isinstance(found, Probed)
    assert seen == ["1/64 of x", "1/32 of x", "1/16 of x"]  # 128 KiB to 512 KiB: grown enough
    last_step = 256 * (8 * MiB // 16 - 8 * MiB // 32)  # 64 MiB
    assert last_step >= GROWN
    assert found.growth.per_byte == pytest.approx(256.0)
    assert found.reason.startswith("probed on 1/64, 1/32 and 1/16 of x: about 256.0x")


@pytest.mark.parametrize("line", ["--probe", "m1Gi --probe", "--preset m1Gi --probe"])
def test_probe_without_auto_is_refused_naming_the_accepted_forms(line):
    with pytest.raises(SpecError) as e:
        parse_task_line(line)
    assert "write %%task auto --probe (or %%task --preset auto --probe)" in str(e.value)


def test_probe_with_auto_parses():
    assert parse_task_line("auto --probe").probe
    assert parse_task_line("--preset auto --probe --name n").probe
    assert not parse_task_line("auto").probe
    with pytest.raises(SpecError, match="--graph"):
        parse_task_line("auto --probe --graph")
