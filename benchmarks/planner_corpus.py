"""The planner's workload corpus: cells that read csv, json, text, numpy, Parquet, Feather,
XML and pickle inputs, each at a size this machine runs (2 cores, 24 GiB), with the data they
read.

It is split in two halves. :data:`TUNING` is what the planner's factors and rules were read
off; :data:`VALIDATION` is never tuned on: it checks that the rules hold on work they were not
written for (its cells were written before the rules they exercise, and their results are
reported, not fitted).

:func:`data` writes every input once into a folder (``TASKCELL_CORPUS``, else a temporary
one) and reuses it; each input also exists at a quarter of its size (``small``), which is what
a first run of a cell reads before the planner scales it to the full input. :func:`alone` runs a
cell's code in a fresh interpreter under GNU ``time`` (or ``os.wait4`` where there is none) and
gives its true peak: the figure the planner's suggestions and recorded peaks are judged against.
The factors of the built-in profiles (:mod:`taskcell.planner.workloads`) were read off this
corpus; ``python -m benchmarks.bench_sizing`` measures it again.
"""

from __future__ import annotations

import gzip
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class Workload:
    """One cell of the corpus: ``code`` reads the input ``data`` names (``{path}`` in it)."""

    name: str
    data: str
    code: str


WORKLOADS = [
    Workload("read_csv, floats", "floats.csv", "import pandas as pd\ndf = pd.read_csv({path!r})"),
    Workload("read_csv, small ints", "ints.csv", "import pandas as pd\ndf = pd.read_csv({path!r})"),
    Workload("read_csv, strings", "mixed.csv", "import pandas as pd\ndf = pd.read_csv({path!r})"),
    Workload("read_csv, gzip", "floats.csv.gz", "import pandas as pd\ndf = pd.read_csv({path!r})"),
    Workload(
        "groupby mean",
        "ints.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\nmeans = df.groupby('a').mean()",
    ),
    Workload(
        "sort_values",
        "mixed.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\ndf = df.sort_values('city')",
    ),
    Workload(
        "merge",
        "mixed.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\n"
        "joined = df.merge(df[['id', 'x']], on='id', suffixes=('', '_2'))",
    ),
    Workload(
        "read_csv in chunks",
        "floats.csv",
        "import pandas as pd\n"
        "total = sum(chunk['a'].sum() for chunk in pd.read_csv({path!r}, chunksize=100_000))",
    ),
    Workload(
        "csv module rows",
        "ints.csv",
        "import csv\nwith open({path!r}) as f:\n    rows = list(csv.reader(f))",
    ),
    Workload(
        "read_json lines",
        "events.jsonl",
        "import pandas as pd\nevents = pd.read_json({path!r}, lines=True)",
    ),
    Workload(
        "json.loads per line",
        "events.jsonl",
        "import json\nwith open({path!r}) as f:\n    events = [json.loads(line) for line in f]",
    ),
    Workload(
        "json.load",
        "records.json",
        "import json\nwith open({path!r}) as f:\n    records = json.load(f)",
    ),
    Workload("whole-file split", "text.txt", "words = open({path!r}).read().split()"),
    Workload(
        "word counts",
        "text.txt",
        "import collections\nwith open({path!r}) as f:\n"
        "    counts = collections.Counter(f.read().split())",
    ),
    Workload(
        "regex findall",
        "text.txt",
        "import re\nwith open({path!r}) as f:\n    words = re.findall(r'\\w+', f.read())",
    ),
    Workload(
        "line count, streamed",
        "text.txt",
        "with open({path!r}) as f:\n    n = sum(1 for line in f)",
    ),
    Workload(
        "checksum, streamed",
        "text.txt",
        "import hashlib\nh = hashlib.sha256()\nwith open({path!r}, 'rb') as f:\n"
        "    for block in iter(lambda: f.read(1 << 20), b''):\n        h.update(block)\n"
        "digest = h.hexdigest()",
    ),
    Workload(
        "gzip lines, streamed",
        "floats.csv.gz",
        "import gzip\nwith gzip.open({path!r}, 'rt') as f:\n    n = sum(1 for line in f)",
    ),
    Workload("whole file as bytes", "text.txt", "data = open({path!r}, 'rb').read()"),
    Workload("np.load", "array.npy", "import numpy as np\na = np.load({path!r})"),
    Workload("np.fft", "array.npy", "import numpy as np\nspectrum = np.fft.fft(np.load({path!r}))"),
    Workload("np.sort", "array.npy", "import numpy as np\nordered = np.sort(np.load({path!r}))"),
    Workload(
        "standardise array",
        "array.npy",
        "import numpy as np\na = np.load({path!r})\nz = (a - a.mean()) / a.std()",
    ),
    Workload(
        "read_parquet", "mixed.parquet", "import pandas as pd\ndf = pd.read_parquet({path!r})"
    ),
    Workload(
        "pickle.load",
        "frame.pkl",
        "import pickle\nwith open({path!r}, 'rb') as f:\n    df = pickle.load(f)",
    ),
]


#: A second corpus, written after the built-in factors were read off the first: other data
#: (long strings, dates, tabs, nested JSON, hex tokens, float32 and int8 arrays, bzip2) and
#: other code (``parse_dates``, ``pivot_table``, ``json_normalize``, ``readlines``,
#: ``csv.DictReader``, ``astype``, ``@``, ``mmap_mode``). Two rules came from it: arrays of
#: small integers widen in arithmetic, and ``DictReader`` rows are dicts.
MORE_WORKLOADS = [
    Workload(
        "read_csv, long strings", "longtext.csv", "import pandas as pd\ndf = pd.read_csv({path!r})"
    ),
    Workload(
        "read_csv, parse_dates",
        "dates.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r}, parse_dates=['d'])",
    ),
    Workload(
        "read_table, 0/1 flags", "flags.tsv", "import pandas as pd\ndf = pd.read_table({path!r})"
    ),
    Workload(
        "pivot_table",
        "sales.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\n"
        "table = df.pivot_table(index='store', columns='item', values='qty', aggfunc='sum')",
    ),
    Workload(
        "describe", "sales.csv", "import pandas as pd\nsummary = pd.read_csv({path!r}).describe()"
    ),
    Workload(
        "json.load, nested",
        "nested.json",
        "import json\nwith open({path!r}) as f:\n    data = json.load(f)",
    ),
    Workload(
        "read_json lines, nested",
        "nested.jsonl",
        "import pandas as pd\ndf = pd.read_json({path!r}, lines=True)",
    ),
    Workload(
        "json_normalize",
        "nested.jsonl",
        "import json, pandas as pd\nwith open({path!r}) as f:\n"
        "    rows = [json.loads(line) for line in f]\ndf = pd.json_normalize(rows)",
    ),
    Workload("split hex tokens", "hex.txt", "tokens = open({path!r}).read().split()"),
    Workload("readlines", "prose.txt", "with open({path!r}) as f:\n    lines = f.readlines()"),
    Workload(
        "read_text().splitlines()",
        "prose.txt",
        "from pathlib import Path\nlines = Path({path!r}).read_text().splitlines()",
    ),
    Workload(
        "np.fromfile float32, rfft",
        "f32.bin",
        "import numpy as np\nspectrum = np.fft.rfft(np.fromfile({path!r}, dtype=np.float32))",
    ),
    Workload(
        "int8 array as float64",
        "int8.npy",
        "import numpy as np\na = np.load({path!r})\nb = a.astype(np.float64)",
    ),
    Workload(
        "matrix product", "matrix.npy", "import numpy as np\nm = np.load({path!r})\np = m @ m.T"
    ),
    Workload(
        "gzip json lines",
        "tags.jsonl.gz",
        "import gzip, json\nwith gzip.open({path!r}, 'rt') as f:\n"
        "    rows = [json.loads(line) for line in f]",
    ),
    Workload(
        "read_csv, bzip2", "floats.csv.bz2", "import pandas as pd\ndf = pd.read_csv({path!r})"
    ),
    Workload(
        "word counts, streamed",
        "prose.txt",
        "from collections import Counter\ncounts = Counter()\nwith open({path!r}) as f:\n"
        "    for line in f:\n        counts.update(line.split())",
    ),
    Workload(
        "csv.DictReader rows",
        "sales.csv",
        "import csv\nwith open({path!r}) as f:\n    rows = list(csv.DictReader(f))",
    ),
    Workload(
        "np.load, mmap_mode",
        "matrix.npy",
        "import numpy as np\nm = np.load({path!r}, mmap_mode='r')\ntop = float(m[:100].sum())",
    ),
]


#: Work whose memory is not a copy of its input, written with the rules that size it by its
#: own shape (issue 27): pairwise distances, an outer product, string splitting, pickled
#: objects, XML, a decomposition, Feather and Parquet columns, a group-by apply, a join.
SHAPED_WORKLOADS = [
    Workload(
        "cdist against a slice",
        "points.npy",
        "import numpy as np\nfrom scipy.spatial.distance import cdist\n"
        "X = np.load({path!r})\nd = cdist(X, X[:1000])",
    ),
    Workload(
        "np.outer", "vec.npy", "import numpy as np\nv = np.load({path!r})\nm = np.outer(v, v)"
    ),
    Workload(
        "str.split",
        "sentences.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\nwords = df['text'].str.split()",
    ),
    Workload(
        "pickle of dicts",
        "records.pkl",
        "import pickle\nwith open({path!r}, 'rb') as f:\n    rows = pickle.load(f)",
    ),
    Workload(
        "ElementTree parse",
        "items.xml",
        "import xml.etree.ElementTree as ET\ntree = ET.parse({path!r})",
    ),
    Workload(
        "svd, thin",
        "tall.npy",
        "import numpy as np\nm = np.load({path!r})\n"
        "u, s, vt = np.linalg.svd(m, full_matrices=False)",
    ),
    Workload(
        "read_feather", "mixed.feather", "import pandas as pd\ndf = pd.read_feather({path!r})"
    ),
    Workload(
        "read_parquet, two columns",
        "mixed.parquet",
        "import pandas as pd\ndf = pd.read_parquet({path!r}, columns=['id', 'x'])",
    ),
    Workload(
        "groupby apply",
        "sales.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\n"
        "ranked = df.groupby('store')[['qty', 'price']].apply(lambda g: g.rank())",
    ),
    Workload(
        "merge with a lookup",
        "sales.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\n"
        "totals = df.groupby('store', as_index=False)['qty'].sum()\n"
        "joined = df.merge(totals, on='store', suffixes=('', '_total'))",
    ),
]

#: Validation cells for the same kinds of work, in other spellings and on other shapes; the
#: rules were never tuned on them.
SHAPED_VALIDATION = [
    Workload(
        "broadcast distances",
        "points.npy",
        "import numpy as np\nX = np.load({path!r})\nB = X[:200]\n"
        "d = np.sqrt(((X[:, None, :] - B[None, :, :]) ** 2).sum(axis=-1))",
    ),
    Workload(
        "ufunc outer",
        "vec.npy",
        "import numpy as np\nv = np.load({path!r})\nm = np.subtract.outer(v, v[:4000])",
    ),
    Workload(
        "str.split, expand",
        "sentences.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\n"
        "parts = df['text'].str.split(expand=True)",
    ),
    Workload(
        "pickle of tuples",
        "tuples.pkl",
        "import pickle\nrows = pickle.load(open({path!r}, 'rb'))",
    ),
    Workload(
        "minidom parse", "items.xml", "from xml.dom import minidom\ndoc = minidom.parse({path!r})"
    ),
    Workload(
        "eig", "matrix.npy", "import numpy as np\nm = np.load({path!r})\nw, v = np.linalg.eig(m)"
    ),
    Workload(
        "pq.read_table columns",
        "mixed.parquet",
        "import pyarrow.parquet as pq\n"
        "df = pq.read_table({path!r}, columns=['name', 'n']).to_pandas()",
    ),
    Workload(
        "read_feather, columns",
        "mixed.feather",
        "import pandas as pd\ndf = pd.read_feather({path!r}, columns=['id', 'city'])",
    ),
    Workload(
        "corrcoef of rows",
        "points.npy",
        "import numpy as np\nX = np.load({path!r})\nc = np.corrcoef(X[:8000])",
    ),
    Workload(
        "groupby transform",
        "sales.csv",
        "import pandas as pd\ndf = pd.read_csv({path!r})\n"
        "df['dev'] = df.groupby('store')['qty'].transform(lambda s: s - s.mean())",
    ),
]

#: The half the planner's rules were read off, and the half they are checked on.
TUNING = [*WORKLOADS, *SHAPED_WORKLOADS]
VALIDATION = [*MORE_WORKLOADS, *SHAPED_VALIDATION]


def _rng(seed: int):
    import numpy as np

    return np.random.default_rng(seed)


def _floats(rows: int):
    import pandas as pd

    return pd.DataFrame(_rng(1).random((rows, 6)), columns=list("abcdef"))


def _ints(rows: int):
    import pandas as pd

    return pd.DataFrame(_rng(2).integers(0, 10, (rows, 8)), columns=list("abcdefgh"))


def _mixed(rows: int):
    import numpy as np
    import pandas as pd

    rng = _rng(3)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])
    return pd.DataFrame(
        {
            "id": np.arange(rows),
            "name": words[rng.integers(0, len(words), rows)],
            "city": np.char.add("city-", rng.integers(0, 5000, rows).astype(str)),
            "x": rng.random(rows).round(4),
            "n": rng.integers(0, 100, rows),
        }
    )


def _events(rows: int):
    import numpy as np
    import pandas as pd

    rng = _rng(4)
    return pd.DataFrame(
        {
            "id": np.arange(rows),
            "user": np.char.add("u", rng.integers(0, 10**6, rows).astype(str)),
            "score": rng.random(rows).round(5),
            "tag": np.array(["a", "bb", "ccc"])[rng.integers(0, 3, rows)],
        }
    )


#: The text's vocabulary: short English-like words, as prose has.
WORDS = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
    "incididunt",
    "ut",
    "labore",
    "et",
    "dolore",
    "magna",
)


def _write_text(path: pathlib.Path, nbytes: int) -> None:
    import numpy as np

    words = np.array(WORDS)
    rng = _rng(5)
    with open(path, "w") as f:
        written = 0
        while written < nbytes:
            picked = words[rng.integers(0, len(words), (20_000, 12))]
            block = "\n".join(" ".join(line) for line in picked) + "\n"
            f.write(block)
            written += len(block)


def _write_lines(path: pathlib.Path, lines, opener=open) -> None:
    """Write ``lines`` (an iterable of lines, or one string) with ``opener`` (gzip.open, ...)."""
    with opener(path, "wt") as f:
        if isinstance(lines, str):
            f.write(lines)
        else:
            f.writelines(lines)


def _nested(rows: int) -> list[dict]:
    return [
        {"id": i, "tags": ["a", "b", str(i % 7)], "meta": {"x": i / 3, "y": f"v{i % 100}"}}
        for i in range(rows)
    ]


def _users(rows: int):
    import json

    return (
        json.dumps({"id": i, "user": {"name": f"u{i % 1000}", "age": i % 90}, "score": i / 7})
        + "\n"
        for i in range(rows)
    )


def _more_frames(name: str, rows: int):
    import numpy as np
    import pandas as pd

    rng = _rng(7)
    if name == "longtext":
        letters = np.array(list("abcdefghij klmnop"))
        notes = ["".join(row) for row in letters[rng.integers(0, len(letters), (rows, 90))]]
        return pd.DataFrame({"id": np.arange(rows), "note": notes})
    if name == "dates":
        stamps = pd.date_range("2020", periods=rows, freq="s").astype(str)
        return pd.DataFrame({"d": stamps, "v": rng.random(rows)})
    if name == "flags":
        return pd.DataFrame(rng.integers(0, 2, (rows, 20)))
    return pd.DataFrame(
        {
            "store": rng.integers(0, 50, rows),
            "item": rng.integers(0, 200, rows),
            "qty": rng.integers(1, 9, rows),
            "price": rng.random(rows).round(2),
        }
    )


def _sentences(rows: int):
    import numpy as np
    import pandas as pd

    words = np.array(WORDS)
    picked = words[_rng(12).integers(0, len(words), (rows, 12))]
    return pd.DataFrame({"id": np.arange(rows), "text": [" ".join(r) for r in picked]})


def _pickle(path: pathlib.Path, objects: list) -> None:
    import pickle

    with open(path, "wb") as f:
        pickle.dump(objects, f, protocol=pickle.HIGHEST_PROTOCOL)


def _records(rows: int) -> list:
    return [{"id": i, "name": f"user{i}", "score": i / 7} for i in range(rows)]


def _tuples(rows: int) -> list:
    return [(i, f"k{i % 5000}", i * 0.5, i % 3 == 0) for i in range(rows)]


def _xml(path: pathlib.Path, k: float) -> None:
    lines = (
        f'<item id="{i}"><name>item {i}</name><price>{i % 997 / 7:.2f}</price></item>\n'
        for i in range(int(250_000 * k))
    )
    _write_lines(path, ["<items>\n", *lines, "</items>\n"])


def _hex(path: pathlib.Path, k: float) -> None:
    rng = _rng(8)
    lines = (
        " ".join(rng.bytes(16).hex() for _ in range(40_000)) + "\n" for _ in range(int(60 * k))
    )
    _write_lines(path, lines)


#: Each input at full size: how to write it, given its path and the share of the full size.
_WRITERS: dict[str, Callable[[pathlib.Path, float], None]] = {
    "floats.csv": lambda p, k: _floats(int(1_600_000 * k)).to_csv(p, index=False),
    "ints.csv": lambda p, k: _ints(int(3_000_000 * k)).to_csv(p, index=False),
    "mixed.csv": lambda p, k: _mixed(int(2_000_000 * k)).to_csv(p, index=False),
    "events.jsonl": lambda p, k: _events(int(1_200_000 * k)).to_json(
        p, orient="records", lines=True
    ),
    "records.json": lambda p, k: _events(int(700_000 * k)).to_json(p, orient="records"),
    "text.txt": lambda p, k: _write_text(p, int(160 * MiB * k)),
    "array.npy": lambda p, k: __import__("numpy").save(p, _rng(6).random(int(20_000_000 * k))),
    "mixed.parquet": lambda p, k: _mixed(int(2_000_000 * k)).to_parquet(p),
    "frame.pkl": lambda p, k: _floats(int(2_000_000 * k)).to_pickle(p),
    "longtext.csv": lambda p, k: _more_frames("longtext", int(400_000 * k)).to_csv(p, index=False),
    "dates.csv": lambda p, k: _more_frames("dates", int(800_000 * k)).to_csv(p, index=False),
    "flags.tsv": lambda p, k: _more_frames("flags", int(800_000 * k)).to_csv(
        p, sep="\t", index=False
    ),
    "sales.csv": lambda p, k: _more_frames("sales", int(1_200_000 * k)).to_csv(p, index=False),
    "nested.json": lambda p, k: p.write_text(__import__("json").dumps(_nested(int(300_000 * k)))),
    "nested.jsonl": lambda p, k: _write_lines(p, _users(int(400_000 * k))),
    "hex.txt": _hex,
    "prose.txt": lambda p, k: _write_text(p, int(16 * MiB * k)),
    "f32.bin": lambda p, k: _rng(9).random(int(30_000_000 * k)).astype("float32").tofile(p),
    "int8.npy": lambda p, k: __import__("numpy").save(
        p, _rng(10).integers(0, 100, int(60_000_000 * k)).astype("int8")
    ),
    "matrix.npy": lambda p, k: __import__("numpy").save(p, _rng(11).random((3000, 3000))),
    "tags.jsonl.gz": lambda p, k: _write_lines(
        p,
        (f'{{"k": {i}, "v": "{"x" * (i % 20)}"}}\n' for i in range(int(500_000 * k))),
        gzip.open,
    ),
    "floats.csv.bz2": lambda p, k: _write_lines(
        p, _floats(int(600_000 * k)).to_csv(index=False), __import__("bz2").open
    ),
    "points.npy": lambda p, k: __import__("numpy").save(p, _rng(13).random((int(120_000 * k), 8))),
    "vec.npy": lambda p, k: __import__("numpy").save(p, _rng(14).random(int(9_000 * k))),
    "sentences.csv": lambda p, k: _sentences(int(400_000 * k)).to_csv(p, index=False),
    "records.pkl": lambda p, k: _pickle(p, _records(int(400_000 * k))),
    "tuples.pkl": lambda p, k: _pickle(p, _tuples(int(400_000 * k))),
    "items.xml": _xml,
    "tall.npy": lambda p, k: __import__("numpy").save(p, _rng(15).random((int(40_000 * k), 300))),
    "mixed.feather": lambda p, k: _mixed(int(2_000_000 * k)).to_feather(p),
}


def _gzip(source: pathlib.Path, target: pathlib.Path) -> None:
    with open(source, "rb") as src, gzip.open(target, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 22)


def data(small: bool = False) -> pathlib.Path:
    """The folder holding every input (at a quarter of the size with ``small``), written once."""
    root = pathlib.Path(os.environ.get("TASKCELL_CORPUS") or tempfile.gettempdir())
    folder = root / ("taskcell-corpus-small" if small else "taskcell-corpus")
    folder.mkdir(parents=True, exist_ok=True)
    share = 0.25 if small else 1.0
    for name, write in _WRITERS.items():
        path = folder / name
        if not path.exists():
            partial = path.with_name(path.name + ".part" + path.suffix)
            write(partial, share)
            partial.rename(path)
    gz = folder / "floats.csv.gz"
    if not gz.exists():
        _gzip(folder / "floats.csv", gz.with_suffix(".part"))
        gz.with_suffix(".part").rename(gz)
    return folder


def cell(workload: Workload, folder: pathlib.Path) -> str:
    """The workload's cell, reading its input from ``folder``."""
    return workload.code.format(path=str(folder / workload.data))


def alone(code: str) -> int:
    """The peak resident memory of ``code`` run in a fresh interpreter, in bytes."""
    time_ = shutil.which("time") or "/usr/bin/time"
    if os.path.exists(time_):
        done = subprocess.run(
            [time_, "-f", "%M", sys.executable, "-c", code], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"{code!r} failed: {done.stderr[-2000:]}")
        return int(done.stderr.strip().splitlines()[-1]) * 1024
    # A process started from this (large) one would count this one's pages until it execs.
    proc = subprocess.Popen([sys.executable, "-c", code], close_fds=True)
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise RuntimeError(f"{code!r} failed with status {status}")
    return usage.ru_maxrss * 1024
