"""What a cell reads, and the memory the planner expects of it before it ever ran."""

from __future__ import annotations

import gzip
import json
import textwrap

import numpy as np
import pandas as pd
import pytest
from dask.sizeof import sizeof

from taskcell.planner import cell_input, estimate_memory
from taskcell.planner.estimate import FLOOR, library_memory
from taskcell.planner.rightsize import memory_needed

MiB = 1 << 20


def test_what_a_cell_reads_values_files_and_names_holding_paths(tmp_path):
    table = tmp_path / "table.csv"
    table.write_text("a,b\n" + "1,2\n" * 10_000)
    packed = tmp_path / "packed.csv.gz"
    packed.write_bytes(gzip.compress(table.read_bytes()))
    frame = pd.DataFrame({"x": np.arange(100_000)})
    namespace = {"frame": frame, "path": str(packed), "np": np, "helper": len, "n": 3}
    code = textwrap.dedent(f"""
        import pandas as pd
        first = pd.read_csv({str(table)!r})
        second = pd.read_csv(path)
        third = np.load("{tmp_path}/missing.npy")
        total = len(first) + len(second) + frame.x.sum() + n + helper([])
    """)
    read = cell_input(code, namespace)
    sizes = {i.what: i.size for i in read.inputs}
    assert sizes == {
        "frame": sizeof(frame),  # as Dask sizes it: object columns by a sample
        "n": sizes["n"],  # a small int, as Dask sizes it
        str(table): table.stat().st_size,
        str(packed): table.stat().st_size,  # decompressed: what read_csv holds
    }  # the path string, the module, the function and the missing file count nothing
    assert read.size == sum(sizes.values())
    assert {"pandas", "numpy"} <= read.libraries


def test_copies_of_small_integers_are_counted_as_numpy_computes_them(tmp_path):
    np.save(tmp_path / "bytes.npy", np.zeros(8 * MiB, dtype=np.int8))
    np.save(tmp_path / "doubles.npy", np.zeros(MiB, dtype=np.float64))
    code = "import numpy as np\na = np.load({!r})\nb = a.astype(np.float64)"
    small = estimate_memory(cell_input(code.format(str(tmp_path / "bytes.npy")), {}))
    wide = estimate_memory(cell_input(code.format(str(tmp_path / "doubles.npy")), {}))
    # Both files hold 8 MiB; the int8 array's float64 copy is 64 MiB, the float64 one's 8 MiB.
    assert small.memory - small.base >= 8 * MiB + 64 * MiB
    assert wide.memory - wide.base < 8 * MiB + 16 * MiB


def test_libraries_count_once_with_what_they_import():
    assert library_memory({"pandas", "numpy", "pyarrow"}) == library_memory({"pandas"})
    assert library_memory({"numpy"}) < library_memory({"pandas"})
    assert library_memory({"someonesown"}) > 0


def write_inputs(folder) -> dict[str, str]:
    rng = np.random.default_rng(0)
    ints = folder / "ints.csv"
    pd.DataFrame(rng.integers(0, 10, (600_000, 6))).to_csv(ints, index=False)
    events = folder / "events.jsonl"
    with open(events, "w") as f:
        for i in range(150_000):
            f.write(json.dumps({"id": i, "user": f"u{i % 977}", "score": i / 7}) + "\n")
    text = folder / "text.txt"
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])
    text.write_text("\n".join(" ".join(row) for row in words[rng.integers(0, 8, (400_000, 8))]))
    array = folder / "array.npy"
    np.save(array, rng.random(4_000_000))
    return {"ints": str(ints), "events": str(events), "text": str(text), "array": str(array)}


CELLS = {
    "csv of small integers": "import pandas as pd\ndf = pd.read_csv({ints!r})",
    "json lines": "import json\nwith open({events!r}) as f:\n    rows = [json.loads(x) for x in f]",
    "words of a text": "words = open({text!r}).read().split()",
    "fft of an array": "import numpy as np\nspectrum = np.fft.fft(np.load({array!r}))",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(CELLS))
def test_the_estimate_holds_the_true_peak_within_a_rung(tmp_path_factory, alone, kind):
    folder = tmp_path_factory.getbasetemp() / "estimate-inputs"
    if not folder.exists():
        folder.mkdir()
        write_inputs(folder)
    paths = {p.stem.split(".")[0]: str(p) for p in folder.iterdir()}
    code = CELLS[kind].format(**paths)
    estimate = estimate_memory(cell_input(code, {}))
    true = alone(code)
    # With the headroom a request adds, it holds the peak; and it is not twice the peak.
    assert true <= memory_needed(estimate.memory), (estimate.describe(), true)
    assert estimate.memory <= 2 * true, (estimate.describe(), true)


@pytest.mark.slow
def test_a_streamed_file_costs_nothing_per_byte(tmp_path, alone):
    big = tmp_path / "big.txt"
    big.write_text("x" * 99 + "\n")
    with open(big, "a") as f:
        f.write(("y" * 99 + "\n") * 300_000)  # 30 MB
    code = f"import hashlib\nh = hashlib.sha256()\nwith open({str(big)!r}, 'rb') as f:\n"
    code += "    for block in iter(lambda: f.read(1 << 20), b''):\n        h.update(block)"
    estimate = estimate_memory(cell_input(code, {}))
    assert estimate.memory < FLOOR + 64 * MiB
    assert estimate.describe().startswith(f"reads {big} (28.6 MiB, streamed)")
    assert alone(code) <= memory_needed(estimate.memory)


def test_dask_graphs_a_cell_reads_are_not_sized_as_data():
    """A Delayed or a Dask DataFrame is a graph, not what the cell holds: sizing one must not
    touch it (``bool(delayed)`` and ``ddf.nbytes`` raise), and it adds nothing."""
    import dask
    import dask.dataframe as dd

    total = dask.delayed(sum)([1, 2])
    frame = dd.from_pandas(pd.DataFrame({"v": np.arange(10.0)}), npartitions=2)
    plain = np.ones(1000)
    found = cell_input(
        "a = total.compute()\nb = frame.v.sum().compute()\nc = plain.sum()",
        {
            "total": total,
            "frame": frame,
            "plain": plain,
        },
    )
    assert [i.what for i in found.inputs] == ["plain"]


def test_a_value_kept_on_a_worker_is_sized_without_fetching_it():
    """A ``RemoteValue`` counts its bytes as it says them; touching it (its shape, its dtype)
    would bring it into the kernel."""
    from taskcell.runner.remote_value import RemoteValue

    class Unfetchable:
        def result(self):
            raise AssertionError("the remote value was fetched")

    big = RemoteValue(Unfetchable(), "big", 2**30)  # type: ignore[arg-type]
    found = cell_input("total = big.sum()", {"big": big})
    assert [(i.what, i.size) for i in found.inputs] == [("big", 2**30)]
