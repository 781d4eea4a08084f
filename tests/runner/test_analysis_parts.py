"""The cell analysis's parts, each on its own: scopes, effects, files and IPython's syntax."""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest

from taskcell.runner.analysis.effects import EffectsVisitor
from taskcell.runner.analysis.files import dotted, file_read, path_literal
from taskcell.runner.analysis.ipython import (
    ends_with_semicolon,
    followed_by_semicolon,
    ipython_call,
    shell,
)
from taskcell.runner.analysis.scopes import ScopeVisitor


def _visited(visitor: ScopeVisitor, code: str) -> ScopeVisitor:
    visitor.visit_cell(ast.parse(code).body)
    return visitor


def _expr(code: str) -> ast.expr:
    return ast.parse(code, mode="eval").body


# -- scopes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reads", "binds", "dels"),
    [
        ("x = y", ["y"], ["x"], []),
        ("y = y + 1", ["y"], ["y"], []),
        ("if c:\n    x = 1\nprint(x)", ["c", "x"], ["x"], []),
        ("def f():\n    return g(a)\ndef g(b):\n    return b", ["g", "a"], ["f", "g"], []),
        ("def f():\n    global n\n    n = 1", [], ["f", "n"], []),
        ("[v for v in items]", ["items"], [], []),
        ("class C:\n    a = 1\n    b = [a for _ in r]", ["r", "a"], ["C"], []),
        ("del x", ["x"], [], ["x"]),
        ("import numpy.linalg as la", [], ["la"], []),
        ("print(len(x))", ["x"], [], []),
    ],
    ids=[
        "assign",
        "read-then-rebind",
        "one-branch",
        "helper-defined-later",
        "global",
        "comprehension-target",
        "class-attribute-hidden",
        "del",
        "import",
        "builtins",
    ],
)
def test_scopes(code: str, reads: list[str], binds: list[str], dels: list[str]) -> None:
    visitor = _visited(ScopeVisitor(), code)
    assert (list(visitor.reads), list(visitor.binds), list(visitor.dels)) == (reads, binds, dels)


def test_scopes_note_no_effects() -> None:
    assert not hasattr(_visited(ScopeVisitor(), "lst.append(1)"), "mutated")


def test_scopes_top_level_await() -> None:
    assert _visited(ScopeVisitor(), "x = 1\nawait f()").top_level_await == 2


# -- effects ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "mutated"),
    [
        ("lst.append(1)", ["lst"]),
        ("d[k] = v", ["d"]),
        ("shuffle(items)", ["items"]),
        ("print(items)", []),
        ("lst = []\nlst.append(1)", []),
        ("n += 1", ["n"]),
    ],
    ids=["method", "item", "passed", "pure-builtin", "own-object", "augassign"],
)
def test_effects_mutated(code: str, mutated: list[str]) -> None:
    assert list(_visited(EffectsVisitor(), code).mutated) == mutated


def test_effects_function_mutated() -> None:
    visitor = _visited(EffectsVisitor(), "def f(x):\n    log.append(x)\n    g(seen)")
    assert visitor.function_mutated == {"f": {"log": None}}


@pytest.mark.parametrize(
    ("code", "facts"),
    [
        ("for m in models:\n    m.fit()", {"loops_over": ["models"]}),
        ("for k, v in d.items():\n    pass", {"loops_over": ["d"]}),
        ("if c:\n    for m in models:\n        pass", {"loops_over": []}),
        ("g = (x for x in y)\nf = open('a')", {"unpicklable": ["g", "f"]}),
        ("g, h = (x for x in y), 1", {"unpicklable": []}),
    ],
    ids=["loop", "loop-items", "nested-loop", "unpicklable", "unpacked"],
)
def test_effects_top_level_facts(code: str, facts: dict[str, list[str]]) -> None:
    visitor = _visited(EffectsVisitor(), code)
    assert {key: list(getattr(visitor, key)) for key in facts} == facts


@pytest.mark.parametrize(
    ("code", "files"),
    [
        ("open('a.csv')", [("open", "a.csv", None)]),
        ("p = 'a.csv'\npd.read_csv(p)", [("pd.read_csv", "a.csv", None)]),
        ("np.load(path)", [("np.load", None, "path")]),
        ("p = 'a.csv'\np = other\nopen(p)", []),
    ],
    ids=["literal", "bound-literal", "notebook-name", "rebound"],
)
def test_effects_files(code: str, files: list[tuple[str, str | None, str | None]]) -> None:
    found = _visited(EffectsVisitor(), code).files
    assert [(f.function, f.path, f.name) for f in found] == files


# -- files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "read"),
    [
        ("pd.read_csv('a.csv')", ("pd.read_csv", "'a.csv'")),
        ("np.load(file=p)", ("np.load", "p")),
        ("Path('x').read_text()", ("Path(...).read_text", "'x'")),
        ("f(p)", None),
    ],
    ids=["reader", "keyword", "path-method", "not-a-reader"],
)
def test_file_read(code: str, read: tuple[str, str] | None) -> None:
    found = file_read(_expr(code))  # type: ignore[arg-type]
    assert (found and (found[0], ast.unparse(found[1]))) == read


def test_dotted_and_path_literal() -> None:
    assert dotted(_expr("np.random.seed")) == "np.random.seed"
    assert path_literal(_expr("Path('a.csv')")) == "a.csv"
    assert path_literal(_expr("name")) is None


# -- IPython's syntax ------------------------------------------------------------------------


def _shell(call: str, transform: Callable[[str], str] | None = None) -> tuple:
    found = ipython_call(_expr(call))
    assert found is not None
    run = shell(*found, transform)
    reads = [ast.unparse(e) for e in run.reads]
    return run.magic, reads, run.captured, [ast.unparse(s) for s in run.code], run.binds


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("get_ipython().system('ls {d} $f')", ("!", ["d", "f"], None, [], True)),
        ("get_ipython().getoutput('ls')", ("!!", [], None, [], True)),
        (
            "get_ipython().run_line_magic('time', 'x = f()')",
            ("%time", [], None, ["x = f()"], True),
        ),
        (
            "get_ipython().run_line_magic('timeit', '-n 10 f(x)')",
            ("%timeit", [], None, ["f(x)"], False),
        ),
        ("get_ipython().run_line_magic('cd', '{d}')", ("%cd", ["d"], None, [], True)),
        (
            "get_ipython().run_cell_magic('capture', 'out', 'y = 1')",
            ("%%capture", [], "out", ["y = 1"], True),
        ),
        (
            "get_ipython().run_cell_magic('timeit', 'a = 1', 'f(a)')",
            ("%%timeit", [], None, ["a = 1", "f(a)"], False),
        ),
        ("get_ipython().run_cell_magic('bash', '', 'ls')", ("%%bash", [], None, [], True)),
        ("get_ipython().run_line_magic('time', 'x = ')", ("%time", [], None, [], True)),
    ],
    ids=[
        "shell",
        "getoutput",
        "line-code",
        "timeit-options",
        "line-expanded",
        "capture",
        "cell-timeit",
        "cell-other",
        "syntax-error",
    ],
)
def test_shell(call: str, expected: tuple) -> None:
    assert _shell(call) == expected


def test_shell_transforms_a_cell_magic_body() -> None:
    call = "get_ipython().run_cell_magic('time', '', 'raw')"
    assert _shell(call, lambda code: "y = 2")[3] == ["y = 2"]


def test_ipython_call_needs_literal_arguments() -> None:
    assert ipython_call(_expr("get_ipython().system(cmd)")) is None
    assert ipython_call(_expr("shell.system('ls')")) is None


@pytest.mark.parametrize(
    ("source", "silenced"),
    [("x;", True), ("x; # note\n", True), ("x", False), ("s = ';'", False)],
    ids=["semicolon", "comment-after", "none", "in-string"],
)
def test_ends_with_semicolon(source: str, silenced: bool) -> None:
    assert ends_with_semicolon(source) is silenced


def test_followed_by_semicolon() -> None:
    source = "a;\nb"
    first, second = ast.parse(source).body
    lines = source.splitlines()
    assert (followed_by_semicolon(lines, first), followed_by_semicolon(lines, second)) == (
        True,
        False,
    )
