"""Tiny notebooks whose exported modules must keep Python's meaning, in every target.

Each case is a notebook of a few cells that once exported to a module meaning something else
(names scoped to a function, star imports moved, a notebook Future turned into its value...),
and the text the notebook prints when run top to bottom. Every case is exported to the three
targets, and the modules run at once, as their users run them: ``python module.py --scheduler
ADDRESS`` (dask), ``python module.py --local`` in the Flyte SDK's venv, ``python module.py`` in
the Latch SDK's venv. A module prints what the notebook printed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from processes import run_session

from export.sdks import sdk_python
from taskcell.export import ExportWarning, export_notebook

from .conftest import notebook

# The modules of every case start together in the first test: their SDKs take a while to import.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

TARGETS = ("dask", "flyte", "latch")

#: name -> (cells, what the notebook prints)
CASES: dict[str, tuple[tuple[str, ...], str]] = {
    # A cell reads the builtin `sum`; a later one binds the name: a function would make it local.
    "global-scoping": (
        (
            "total = 5",
            "print(sum([1, 2]))",
            "%%task\ndouble = total * 2",
            "sum = double\nprint(sum)",
        ),
        "3\n10\n",
    ),
    # pylab's star import binds numpy's `sum`, `np` and `typing`, for the notebook's cells only.
    "pylab-star-import": (
        (
            "from pylab import *",
            "%%task\nhalf = pi / 2\nsame = sum is np.sum",
            "print(round(half, 2), same, typing.__name__)",
        ),
        "1.57 True numpy.typing\n",
    ),
    # The notebook's own names, private-looking ones too, never rebind the module's machinery.
    "the-modules-machinery-is-its-own": (
        (
            "import random\n_CARRIERS = _INPLACE = 'mine'\nitems = []",
            "%%task\nitems.append(random.random() < 2)",
            "print(items, _CARRIERS, _INPLACE)",
        ),
        "[True] mine mine\n",
    ),
    # A star import rebinds `random` where its cell ran, not before.
    "star-import-in-place": (
        (
            "import random\nrandom.seed(0)\nprint(type(random).__name__)",
            "from numpy.random import *\nprint(type(random).__name__)",
            "%%task\nshape = random(3).shape",
            "print(shape)",
        ),
        "module\nmethod\n(3,)\n",
    ),
    # numpy's star import binds `typing`; the module's own machinery is not that name.
    "star-import-never-rebinds-the-module": (
        ("from numpy import *", "%%task\nhalf = pi / 2", "print(round(half, 2), typing.__name__)"),
        "1.57 numpy.typing\n",
    ),
    # A function reads the name its cell bound (a later import), not the first import of it.
    "function-reads-its-cells-import": (
        (
            "import random\nrandom.seed(0)",
            "from random import random\ndef coin():\n    return random() < 2",
            "%%task\nc = coin()",
            "print(c)",
        ),
        "True\n",
    ),
    # A later cell binds `g` before it reads it: the task's generator is read by no other cell.
    "a-later-cell-binds-before-it-reads": (
        ("%%task\ng = (i for i in range(3))\nn = 1", "g = [n]\nprint(g)", "print(g)"),
        "[1]\n[1]\n",
    ),
    # Two names for one list travel together (Latch: in one pickle), so they stay one object.
    "names-sharing-an-object": (
        (
            "results = []\nalias = results\nsize = 3",
            "%%task\nresults.append(1)",
            "print(alias is results, alias, size)",
        ),
        "True [1] 3\n",
    ),
    # A change in place is the one %%task makes (taskcell.runner.inplace): an array.array, kept
    # in C, takes its new items, and every name for it sees them.
    "a-change-in-place-is-the-kernels": (
        (
            "import array\na = array.array('i', [1])\nb = a",
            "%%task\na.append(2)",
            "print(b, b is a)",
        ),
        "array('i', [1, 2]) True\n",
    ),
    # IPython's alias %%file and automagic `cat` (a one-line cell) run as IPython runs them.
    "aliases-and-automagic": (
        (
            "%%file notes.txt\nhello",
            "cat notes.txt",
            "%%task\nn = len(open('notes.txt').read())",
            "print(n)",
        ),
        "Writing notes.txt\nhello\n6\n",
    ),
    # A cached notebook function pickles by its name, which only the process that made it
    # can look up: it travels by value, as %%task carries it.
    "a-cached-notebook-function": (
        (
            "import functools\n@functools.lru_cache(maxsize=None)\n"
            "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
            "%%task\nf = fib(20)\nprint(fib.cache_parameters())",
            "print(f, fib(10))",
        ),
        "{'maxsize': None, 'typed': False}\n6765 55\n",
    ),
    # A name a task binds to a part of an input it changes is the notebook's own object
    # (Flyte: the two come back in one pickle).
    "an-output-bound-from-a-changed-input": (
        (
            "a = [1]\nb = {'x': a, 'y': a}",
            "%%task\nc = b['x']\nb['x'].append(3)",
            "print(c is a, b['y'] is a, c, b)",
        ),
        "True True [1, 3] {'x': [1, 3], 'y': [1, 3]}\n",
    ),
    # An instance of a notebook class comes back from a task: the class keeps its own
    # methods, which read the module's names as they are (cloudpickle would set copies).
    "a-notebook-class-keeps-its-methods": (
        (
            "from dataclasses import dataclass, field\nprefix = 'a'\n@dataclass\nclass Bag:\n"
            "    things: list = field(default_factory=list)\n"
            "    def label(self):\n        return prefix + str(len(self.things))\nheld = Bag()",
            "%%task\nheld.things.append(1)",
            "prefix = 'b'\nprint(held.label(), type(held) is Bag)",
        ),
        "b1 True\n",
    ),
    # A notebook Future, alone or in a collection, reaches a task as a Future (the cluster's
    # worker has one thread: the task must not hold it while it waits).
    "future-stays-a-future": (
        (
            "from distributed import Client\nclient = Client()",
            "f = client.submit(lambda: 41)\nfs = {'a': [f]}",
            "%%task\nprint(f.result() + 1, fs['a'][0].result())",
        ),
        "42 41\n",
    ),
}


def _export(cells: tuple[str, ...], target: str, path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)
        path.write_text(export_notebook(notebook(*cells), target))


@pytest.fixture(scope="module")
def printed(module_dask, tmp_path_factory):
    """``printed(case, target) -> finished process``: every case's modules run together."""
    module_dask.worker()
    module_dask.wait_for_workers(1)
    pythons = {"dask": Path(sys.executable)}
    started: dict[tuple[str, str], subprocess.Popen] = {}
    options = {"dask": ["--scheduler", module_dask.address], "flyte": ["--local"], "latch": []}
    try:
        for target in TARGETS:
            if target not in pythons:
                pythons[target] = sdk_python(target)
            for case, (cells, _) in CASES.items():
                folder = tmp_path_factory.mktemp(f"{case}-{target}")
                module = folder / "workflow.py"
                _export(cells, target, module)
                env = {**os.environ, "PYTHONPATH": "", "LOG_LEVEL": "error", "TMPDIR": str(folder)}
                started[case, target] = subprocess.Popen(
                    [str(pythons[target]), str(module), *options[target]],
                    cwd=folder,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,  # its cluster's processes end with it
                )
        done = {}
        for key, process in started.items():
            stdout, stderr = process.communicate(timeout=300)
            done[key] = subprocess.CompletedProcess(
                process.args, process.returncode, stdout, stderr
            )
    finally:
        for process in started.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return lambda case, target: done[case, target]


#: (case, target) -> why the module prints something else there yet.
KNOWN = {
    ("a-notebook-class-keeps-its-methods", "flyte"): (
        "Flyte: cloudpickle sets the notebook's class's attributes from the task's copy, "
        "methods whose globals are a copy of the module's"
    ),
    ("a-notebook-class-keeps-its-methods", "latch"): (
        "Latch: a class a plain cell defines is local to that cell's task: its methods read "
        "the names of that cell as closure cells"
    ),
    ("an-output-bound-from-a-changed-input", "latch"): (
        "Latch: a task reading b alone gets b, not the a it shares a list with (they travel "
        "together only between cells binding them), so the change does not show through a"
    ),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_the_module_prints_what_the_notebook_printed(case, target, printed, request):
    if (case, target) in KNOWN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[case, target]))
    finished = printed(case, target)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert finished.stdout == CASES[case][1]


#: Loads a module as a Flyte or Latch pod does (its cells not run) and calls one task's function
#: there, with an empty process-wide state; prints what it returned.
POD = """
import pickle, runpy, sys

namespace = runpy.run_path(sys.argv[1])  # not as __main__: the workflow does not run
task = namespace[sys.argv[2]]
function = getattr(task, "func", None) or task.task_function
value = function(state={})
print(pickle.loads(pickle.dumps(value[0] if isinstance(value, tuple) else value)))
"""


@pytest.mark.parametrize(
    "stars",
    [
        "from numpy.random import *",
        "try:\n    from no_such_module_here import *\nexcept ImportError:\n"
        "    from numpy.random import *",
    ],
    ids=["star-import", "star-import-in-a-try"],
)
@pytest.mark.parametrize("target", ["flyte", "latch"])
def test_a_task_in_a_process_of_its_own_starts_from_the_star_imports_before_it(
    target, stars, tmp_path
):
    """A remote task runs in a process where no cell before it ran: it runs the star imports
    before its cell itself (a ``try`` of them whole), so ``random`` is numpy's there too, not
    the module imported first."""
    cells = ("import random", stars, "%%task\nkind = type(random).__name__", "print(kind)")
    module, pod = tmp_path / "workflow.py", tmp_path / "pod.py"
    _export(cells, target, module)
    pod.write_text(POD)
    env = {**os.environ, "PYTHONPATH": "", "LOG_LEVEL": "error", "TMPDIR": str(tmp_path)}
    done = run_session(
        [str(sdk_python(target)), str(pod), str(module), "compute_kind"],
        cwd=tmp_path,
        env=env,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.splitlines()[-1] == "method"
