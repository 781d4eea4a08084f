"""Which IPython magics a ``%%task`` cell may use: those that mean on a worker what they mean
in the notebook. The others need the notebook's kernel and are refused, by name, before
anything runs."""

from __future__ import annotations

from taskcell.errors import CellCodeError
from taskcell.runner.analysis import CellAnalysis

#: Magics and shell escapes that run in the cell's own process, as in a kernel: timing and
#: profiling, the working directory and environment variables (both come back), shell
#: commands and scripts, captured output, displays.
WORKER_MAGICS = frozenset(
    {
        "!",
        "!!",
        "%cd",
        "%pwd",
        "%env",
        "%set_env",
        "%sx",
        "%system",
        "%time",
        "%timeit",
        "%prun",
        "%%time",
        "%%timeit",
        "%%prun",
        "%%capture",
        "%%bash",
        "%%sh",
        "%%script",
        "%%writefile",
        "%%html",
        "%%HTML",
        "%%markdown",
        "%%latex",
        "%%svg",
        "%%javascript",
        "%%js",
    }
)


def check_magics(analysis: CellAnalysis) -> None:
    """Refuse a cell that uses a magic only the notebook's kernel can run (``%matplotlib``,
    ``%load_ext``, ``%store``, ``%pip``, another ``%%task``...), naming each."""
    refused = [m for m in analysis.magics if m not in WORKER_MAGICS]
    if refused:
        allowed = ", ".join(sorted(m for m in WORKER_MAGICS if m[0] == "%" and m != "%%HTML"))
        raise CellCodeError(
            f"{', '.join(refused)} cannot run inside a %%task cell: "
            f"{'it needs' if len(refused) == 1 else 'they need'} the notebook's kernel. "
            f"Run {'it' if len(refused) == 1 else 'them'} in a cell of its own. "
            f"A task cell can use !cmd and {allowed}."
        )
