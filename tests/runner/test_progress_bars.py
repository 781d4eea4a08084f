"""tqdm's notebook bars in a cell process (:mod:`taskcell.runner.progress`): one display per
bar, updated in place, drawn as ``tqdm.notebook`` draws its widget. Each cell runs in the
cell's shell, as the cell process runs it, in a process of its own (the shell takes over the
process: IPython's singleton, the tqdm modules, stdin), its displays caught where the notebook
would get them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("tqdm")

CELL_PROCESS = textwrap.dedent("""
    import json, sys
    from taskcell.runner import cell_shell
    sent = []
    namespace = {}
    with cell_shell.cell_shell(namespace, sent.append):
        exec(sys.argv[1], namespace)
    print(json.dumps([event for kind, event in sent if kind == "display"]))
    """)


def run(code: str) -> list[dict]:
    """The display events of ``code`` run as a task cell's body."""
    done = subprocess.run(
        [sys.executable, "-c", CELL_PROCESS, code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_bar_is_shown_once_then_updated_under_its_display_id():
    events = run("from tqdm.auto import tqdm\nfor i in tqdm(range(5), desc='load'): pass")
    first, *updates = events
    display_id = first["transient"]["display_id"]
    assert "update" not in first and "0/5" in first["data"]["text/plain"]
    assert updates and all(
        e["update"] and e["transient"]["display_id"] == display_id for e in updates
    )
    last = updates[-1]["data"]
    assert last["text/plain"].startswith("load: 100%") and "5/5" in last["text/plain"]
    assert 'value="5" max="5"' in last["text/html"] and "#5cb85c" in last["text/html"]


@pytest.mark.parametrize(
    "code",
    [
        "from tqdm.notebook import tqdm\nfor i in tqdm(range(3)): pass",
        "from tqdm.notebook import trange\nfor i in trange(3): pass",
        "from tqdm.notebook import tqdm_notebook\nfor i in tqdm_notebook(range(3)): pass",
        "from tqdm.autonotebook import trange\nfor i in trange(3): pass",
        "from tqdm.auto import trange\nfor i in trange(3): pass",
    ],
    ids=["notebook", "notebook-trange", "tqdm_notebook", "autonotebook-trange", "auto-trange"],
)
def test_every_notebook_spelling_draws_the_display_bar(code):
    events = run(code)
    assert len({e["transient"]["display_id"] for e in events}) == 1
    assert "3/3" in events[-1]["data"]["text/plain"]


def test_plain_tqdm_stays_a_text_bar():
    assert run("from tqdm import tqdm\nfor i in tqdm(range(3)): pass") == []


def test_leave_false_empties_the_display_and_an_error_keeps_it_red():
    (*_, gone) = run("from tqdm.auto import tqdm\nfor i in tqdm(range(3), leave=False): pass")
    assert gone["data"] == {"text/plain": ""}
    code = (
        "from tqdm.auto import tqdm\n"
        "try:\n    for i in tqdm(range(9), leave=False): 1 / (i - 2)\n"
        "except ZeroDivisionError: pass"
    )
    (*_, stopped) = run(code)
    assert "2/9" in stopped["data"]["text/plain"] and "#d9534f" in stopped["data"]["text/html"]


def test_a_disabled_bar_shows_nothing():
    assert run("from tqdm.auto import tqdm\nfor i in tqdm(range(3), disable=True): pass") == []
