"""The planner's workload corpus: cells that read csv, json, text, numpy, parquet and pickle
inputs, each at a size this machine runs (2 cores, 24 GiB), with the data they read.

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
