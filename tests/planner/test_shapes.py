"""The planner sizes what the code makes by its shape, classifies each file per call, and
reads columnar, pickle and XML files by their own contents."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from taskcell.planner.estimate import cell_input, estimate_memory
from taskcell.planner.recognize import recognize
from taskcell.planner.shapes import Arr, broadcast

MiB = 1 << 20


def test_pairwise_distances_are_rows_by_rows_of_their_operands(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((50_000, 8)))
    code = (
        "import numpy as np\nfrom scipy.spatial.distance import cdist\n"
        f"X = np.load({str(path)!r})\nd = cdist(X, X[:1500])"
    )
    work = cell_input(code, {}).work
    assert work.shaped.memory == 50_000 * 1500 * 8
    assert "cdist" in work.operations


def test_notebook_arrays_give_their_shapes():
    X = np.zeros((4000, 3))
    work = cell_input("import numpy as np\nm = np.outer(X[:, 0], X[:2000, 1])", {"X": X}).work
    assert work.shaped.memory == 4000 * 2000 * 8


def test_a_growing_broadcast_and_what_derives_from_it_are_held_together():
    A = np.zeros((1000, 3))
    code = "d = ((A[:, None, :] - A[None, :500, :]) ** 2).sum(axis=-1)"
    work = cell_input(code, {"A": A}).work
    temp = 1000 * 500 * 3 * 8
    assert work.shaped.memory == 2 * temp  # the difference and its square, at once


def test_decompositions_hold_their_factors_and_a_workspace():
    m = np.zeros((3000, 200))
    thin = cell_input(
        "import numpy as np\nu, s, vt = np.linalg.svd(m, full_matrices=False)", {"m": m}
    )
    full = cell_input("import numpy as np\nu, s, vt = np.linalg.svd(m)", {"m": m})
    assert full.work.shaped.memory >= 3000 * 3000 * 8 > thin.work.shaped.memory >= 3000 * 200 * 8


def test_sized_arrays_at_another_input_size_grow_as_their_shapes_do():
    v = np.zeros(8000)
    outer = cell_input("import numpy as np\nm = np.outer(v, v)", {"v": v}).work.shaped
    assert outer.at(1.0) == outer.memory == 8000 * 8000 * 8
    assert outer.at(0.25) == outer.memory // 16  # a quarter of the rows: a sixteenth
    X = np.zeros((8000, 4))
    code = "import numpy as np\nfrom scipy.spatial.distance import cdist\nd = cdist(X, X[:500])"
    sliced = cell_input(code, {"X": X}).work.shaped
    assert sliced.at(0.25) == sliced.memory // 4  # against a fixed slice: in proportion


def test_what_the_code_does_not_size_falls_back_to_copy_factors():
    work = recognize("import numpy as np\nv = f()\nm = np.outer(v, v)")
    assert work.shaped.memory == 0 and work.extra == 2.0


def test_broadcasting_follows_numpy():
    assert broadcast((5, 1, 3), (4, 3)) == (5, 4, 3)
    assert broadcast((2,), (3,)) is None
    assert Arr((2, 3), 4).nbytes == 24


def test_each_open_is_classified_by_its_own_use(tmp_path):
    streamed, whole = tmp_path / "a.txt", tmp_path / "b.txt"
    streamed.write_text("x y\n" * 1000)
    whole.write_text("x y\n" * 1000)
    code = (
        f"with open({str(streamed)!r}) as f:\n    n = sum(1 for line in f)\n"
        f"words = open({str(whole)!r}).read().split()"
    )
    holdings = {i.what: i.holding for i in cell_input(code, {}).inputs}
    assert holdings == {str(streamed): "stream", str(whole): "words"}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    folder = tmp_path_factory.mktemp("columnar")
    rng = np.random.default_rng(0)
    n = 200_000
    frame = pd.DataFrame(
        {"id": np.arange(n), "x": rng.random(n), "name": rng.choice(["alpha", "beta"], n)}
    )
    frame.to_parquet(folder / "t.parquet")
    frame.to_feather(folder / "t.feather")
    return folder, int(frame.memory_usage(deep=True).sum()), int(frame[["id"]].memory_usage().sum())


@pytest.mark.parametrize("reader", ["read_parquet", "read_feather", "read_table"])
def test_columnar_files_are_read_by_their_footers_and_columns(table, reader):
    folder, whole, one = table
    path = folder / ("t.feather" if reader == "read_feather" else "t.parquet")
    read = lambda extra: cell_input(  # noqa: E731
        f"import pandas as pd\ndf = pd.{reader}({str(path)!r}{extra})", {}
    ).inputs[0]
    everything, only_id = read(""), read(", columns=['id']")
    assert everything.holding == only_id.holding == "columnar"
    assert 0.8 * whole <= everything.loaded <= 1.5 * whole
    assert 0.8 * one <= only_id.loaded <= 1.5 * one


def test_a_pickle_of_python_objects_is_sized_by_the_objects_it_builds(tmp_path, alone):
    path = tmp_path / "rows.pkl"
    with open(path, "wb") as f:
        pickle.dump([{"id": i, "name": f"user{i}", "score": i / 7} for i in range(300_000)], f)
    code = f"import pickle\nwith open({str(path)!r}, 'rb') as f:\n    rows = pickle.load(f)"
    found = cell_input(code, {}).inputs[0]
    base = alone("import pickle")
    built = alone(code) - base
    assert 0.75 * built <= found.loaded <= 1.5 * built, (found.loaded / MiB, built / MiB)


def test_an_xml_file_is_read_and_sized_by_its_tree(tmp_path, alone):
    path = tmp_path / "items.xml"
    items = "".join(f'<item id="{i}"><name>n{i}</name></item>\n' for i in range(150_000))
    path.write_text(f"<items>\n{items}</items>\n")
    code = f"import xml.etree.ElementTree as ET\ntree = ET.parse({str(path)!r})"
    read = cell_input(code, {})
    (found,) = read.inputs
    assert found.holding == "xml"
    built = alone(code) - alone("import xml.etree.ElementTree as ET")
    assert 0.75 * built <= found.memory <= 1.75 * built, (found.memory / MiB, built / MiB)


def test_string_splitting_is_measured_on_a_sample(tmp_path, alone):
    path = tmp_path / "s.csv"
    words = np.array(["alpha", "beta", "gamma", "delta"])
    texts = [" ".join(r) for r in words[np.random.default_rng(1).integers(0, 4, (200_000, 10))]]
    pd.DataFrame({"text": texts}).to_csv(path, index=False)
    code = f"import pandas as pd\ndf = pd.read_csv({str(path)!r})\nw = df['text'].str.split()"
    estimate = estimate_memory(cell_input(code, {}))
    true = alone(code)
    assert true <= estimate.memory * 1.25 and estimate.memory <= 2 * true, (estimate.memory, true)


def test_the_estimate_says_where_the_code_gives_no_basis(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(b"x" * 1000)
    said = estimate_memory(cell_input(f"d = mylib.load({str(path)!r})", {})).describe()
    assert "no basis" in said and "run it once on a smaller file and auto scales" in said
    with_values = cell_input(f"d = mylib.load({str(path)!r}, x)", {"x": np.zeros(100_000)})
    said = estimate_memory(with_values).describe()
    assert "%%task auto --probe measures the cell on samples of x" in said
