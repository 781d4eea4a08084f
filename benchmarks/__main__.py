"""``make bench``: run every ``benchmarks/bench_*.py`` and write ``benchmarks/results.md``.

``python -m benchmarks bench_magic`` runs one module and only prints its table.

Each module has ``run() -> list[dict]`` returning rows with ``benchmark``, ``taskcell_s``,
``baseline_s``, ``ratio`` and ``note``: taskcell against the raw Dask equivalent measured in
the same run, on the same cluster. Figures are reported, never asserted.
"""

from __future__ import annotations

import json
import pathlib
import platform
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def _table(rows: list[dict]) -> str:
    lines = ["| benchmark | taskcell | baseline | ratio | note |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['benchmark']} | {r['taskcell_s']:.4g} s | {r['baseline_s']:.4g} s "
            f"| {r['ratio']:.2f}x | {r.get('note', '')} |"
        )
    return "\n".join(lines)


def _run_alone(name: str) -> list[dict]:
    """Run one benchmark module in a fresh interpreter, so no module's leftovers skew another's."""
    code = f"import json, benchmarks.{name} as m; print('ROWS=' + json.dumps(m.run()))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=HERE.parent, capture_output=True, text=True, check=True
    )
    line = next(x for x in reversed(done.stdout.splitlines()) if x.startswith("ROWS="))
    return json.loads(line.removeprefix("ROWS="))


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem for p in HERE.glob("bench_*.py"))
    rows: list[dict] = []
    for name in names:
        started = time.monotonic()
        found = _run_alone(name)
        print(f"{name}: {len(found)} rows in {time.monotonic() - started:.1f} s")
        print(_table(found))
        rows += found
    if argv:
        return 0  # a subset only prints; results.md always holds a whole run
    header = (
        "# Benchmarks\n\nWritten by `make bench` on "
        f"{time.strftime('%Y-%m-%d')} ({platform.machine()}, {platform.python_version()}). "
        "Each ratio is taskcell's time over the raw Dask equivalent measured in the same run.\n\n"
    )
    (HERE / "results.md").write_text(header + _table(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
