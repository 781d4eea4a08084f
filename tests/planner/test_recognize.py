"""What a cell does with the files it reads: held whole, as what, or streamed."""

from __future__ import annotations

import textwrap

import pytest

from taskcell.planner.recognize import CellWork, Read, recognize


def holdings(code: str) -> dict[str, str]:
    work = recognize(textwrap.dedent(code).strip())
    return {r.function: r.holding for r in work.reads}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("df = pd.read_csv('a.csv')", {"pd.read_csv": "csv"}),
        ("df = pd.read_table(p)", {"pd.read_table": "csv"}),
        ("df = pd.read_json(p, lines=True)", {"pd.read_json": "json-lines-frame"}),
        ("df = pd.read_json(p)", {"pd.read_json": "json-frame"}),
        ("df = pd.read_parquet(p)", {"pd.read_parquet": "columnar"}),
        ("df = pd.read_excel(p)", {"pd.read_excel": "frame"}),
        ("df = pd.read_pickle(p)", {"pd.read_pickle": "pickle"}),
        ("a = np.load('a.npy')", {"np.load": "array"}),
        ("a = numpy.fromfile(p)", {"numpy.fromfile": "array"}),
        ("a = np.loadtxt(p)", {"np.loadtxt": "text-array"}),
        ("a = np.memmap(p)", {"np.memmap": "stream"}),
        ("words = open(p).read().split()", {"open": "words"}),
        ("lines = open(p).read().splitlines()", {"open": "lines"}),
        ("text = open(p).read()", {"open": "text"}),
        ("blob = open(p, 'rb').read()", {"open": "bytes"}),
        ("text = Path(p).read_text()", {"Path(...).read_text": "text"}),
        ("blob = Path(p).read_bytes()", {"Path(...).read_bytes": "bytes"}),
        ("found = re.findall(r'\\w+', open(p).read())", {"open": "words"}),
        ("data = json.loads(open(p).read())", {"open": "json"}),
        ("with open(p) as f:\n    rows = json.load(f)", {"open": "json"}),
        ("with open(p, 'rb') as f:\n    obj = pickle.load(f)", {"open": "pickle"}),
        ("with open(p) as f:\n    rows = list(csv.reader(f))", {"open": "csv-rows"}),
        ("with open(p) as f:\n    rows = list(csv.DictReader(f))", {"open": "csv-dicts"}),
        ("with open(p) as f:\n    lines = f.readlines()", {"open": "lines"}),
        ("with open(p) as f:\n    rows = [json.loads(x) for x in f]", {"open": "json-lines"}),
        ("with open(p) as f:\n    rows = [x.split(',') for x in f]", {"open": "words"}),
        ("f = open(p)\ntext = f.read()\nwords = text.split()", {"open": "words"}),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None,
)
def test_files_read_whole(code, expected):
    assert holdings(code) == expected


@pytest.mark.parametrize(
    "code",
    [
        "with open(p) as f:\n    n = sum(1 for line in f)",
        "with open(p) as f:\n    for line in f:\n        total += len(line)",
        "h = hashlib.sha256()\nwith open(p, 'rb') as f:\n"
        "    for b in iter(lambda: f.read(1 << 20), b''):\n        h.update(b)",
        "with gzip.open(p, 'rt') as f:\n    n = sum(1 for line in f)",
        "total = sum(c['a'].sum() for c in pd.read_csv(p, chunksize=10_000))",
        "reader = pd.read_json(p, lines=True, chunksize=1000)",
        "with open(p) as f:\n    for row in csv.reader(f):\n        n += 1",
        "with open(p) as f:\n    first = f.readline()",
    ],
    ids=[
        "line-count",
        "for-loop",
        "blocks",
        "gzip-lines",
        "chunksize",
        "json-chunks",
        "csv-loop",
        "one-line",
    ],
)
def test_files_streamed_piece_by_piece(code):
    assert set(holdings(code).values()) == {"stream"}


def test_a_loop_that_keeps_what_it_reads_is_not_a_stream():
    code = "rows = []\nwith open(p) as f:\n    for line in f:\n        rows.append(json.loads(x))"
    assert holdings(code) == {"open": "json-lines"}


@pytest.mark.parametrize(
    ("code", "extra", "operations"),
    [
        ("df = pd.read_csv(p)", 0.0, ()),
        ("df = pd.read_csv(p).sort_values('x')", 1.0, ("sort_values",)),
        ("s = np.fft.fft(np.load(p))", 8.0, ("fft",)),
        ("df = pd.read_csv(p)\nt = df.pivot_table(index='a')\nu = df.merge(t)", 2.0,
         ("pivot_table", "merge")),
        ("a = np.load(p)\nz = (a - a.mean()) / a.std()", 2.0, ("arithmetic",)),
        ("a = np.load(p)\nn = len(a) + 1", 0.0, ()),
        ("m = np.load(p)\nproduct = m @ m.T", 2.0, ("arithmetic",)),
    ],
    ids=["plain", "sort", "fft", "heaviest", "array-arithmetic", "scalar-arithmetic", "matmul"],
)  # fmt: skip
def test_operations_that_copy_the_data(code, extra, operations):
    work = recognize(code)
    assert (work.extra, work.operations) == (extra, operations)


def test_arithmetic_on_a_notebook_array_counts_when_named():
    assert recognize("z = a * 2 + 1", values=["a"]).extra == 2.0
    assert recognize("z = a * 2 + 1").extra == 0.0


def test_code_that_does_not_parse_is_no_work():
    assert recognize("df = pd.read_csv(") == CellWork()
    assert recognize("x = 1").reads == ()
    assert CellWork((Read("open", "text"),)).holding("np.load") == "unknown"
