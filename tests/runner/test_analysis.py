"""Cell analysis: tiny cells in, whole records out; and the globals notebook functions need."""

from __future__ import annotations

import ast

import pytest

from taskcell.runner.analysis import (
    CellAnalysis,
    FileRead,
    analyze_cell,
    analyze_statements,
    ipython_call,
    is_get_ipython,
)

A = CellAnalysis

CASES = [
    # -- reads before binds ----------------------------------------------------------------
    ("augassign", "x += 1", A(inputs=("x",), outputs=("x",), mutated=("x",))),
    ("read-then-rebind", "y = y + 1", A(inputs=("y",), outputs=("y",))),
    ("bind-then-read", "a = 1\nb = a + c", A(inputs=("c",), outputs=("a", "b"))),
    (
        "order-of-first-read",
        "z = b + a\nw = a + q",
        A(inputs=("b", "a", "q"), outputs=("z", "w")),
    ),
    ("del-reads", "del x", A(inputs=("x",), deleted=("x",))),
    ("del-then-rebind", "x = 1\ndel x\nx = 2", A(outputs=("x",))),
    (
        "bind-then-del",
        "t = f()\ndel t",
        A(inputs=("f",), outputs=("t",), deleted=("t",), maybe_unbound=("t",)),
    ),
    (
        "conditional-del",
        "x = 1\nif c:\n    del x",
        A(inputs=("c",), outputs=("x",), deleted=("x",), maybe_unbound=("x",)),
    ),
    (
        "attribute-and-subscript-targets",
        "a.b = 1\nd[k] = v\ndel e[0]",
        A(inputs=("a", "v", "d", "k", "e"), mutated=("a", "d", "e")),
    ),
    # -- flow --------------------------------------------------------------------------------
    (
        "if-one-branch",
        "if c:\n    x = 1\nprint(x)",
        A(inputs=("c", "x"), outputs=("x",), has_last_expr=True, maybe_unbound=("x",)),
    ),
    (
        "if-both-branches",
        "if c:\n    x = 1\nelse:\n    x = 2\ny = x",
        A(inputs=("c",), outputs=("x", "y")),
    ),
    (
        "else-raise-ends-path",
        "if c:\n    x = 1\nelse:\n    raise ValueError(c)\ny = x",
        A(inputs=("c",), outputs=("x", "y"), mutated=("c",)),
    ),
    (
        "for-loop",
        "for i in items:\n    total = i\nout = (i, total)",
        A(
            inputs=("items", "i", "total"),
            outputs=("i", "total", "out"),
            maybe_unbound=("i", "total"),
            loops_over=("items",),
        ),
    ),
    (
        "read-before-bind-in-loop",
        "for i in r:\n    acc = acc + i\n",
        A(inputs=("r", "acc"), outputs=("i", "acc"), maybe_unbound=("i", "acc"), loops_over=("r",)),
    ),
    (
        "while-true-break",
        "while True:\n    v = poll()\n    if v:\n        break\nw = v",
        A(inputs=("poll",), outputs=("v", "w")),
    ),
    (
        "for-else",
        "for i in r:\n    pass\nelse:\n    done = 1\nz = done",
        A(inputs=("r",), outputs=("i", "done", "z"), maybe_unbound=("i",), loops_over=("r",)),
    ),
    (
        "break-skips-else",
        "for i in r:\n    if i:\n        break\nelse:\n    done = 1\nz = done",
        A(
            inputs=("r", "done"),
            outputs=("i", "done", "z"),
            maybe_unbound=("i", "done"),
            loops_over=("r",),
        ),
    ),
    (
        "with-as",
        "with open(p) as fh:\n    data = fh.read()\nn = len(data)",
        A(inputs=("p",), outputs=("fh", "data", "n"), files=(FileRead("open", name="p"),)),
    ),
    (
        "try-except-as",
        "try:\n    r = f()\nexcept KeyError as e:\n    r = str(e)\nres = r",
        A(inputs=("f",), outputs=("r", "e", "res"), deleted=("e",), maybe_unbound=("e",)),
    ),
    (
        "try-finally",
        "try:\n    a = 1\nfinally:\n    b = 2\nc = a + b",
        A(outputs=("a", "b", "c")),
    ),
    (
        "walrus",
        "if (n := len(xs)) > 3:\n    m = n",
        A(inputs=("xs",), outputs=("n", "m"), maybe_unbound=("m",)),
    ),
    (
        "walrus-behind-or",
        "ok = a or (b := 2)\nc = b",
        A(inputs=("a", "b"), outputs=("b", "ok", "c"), maybe_unbound=("b",)),
    ),
    (
        "match-captures",
        "match p:\n    case Point(x=0, y=yy):\n        r = yy\n"
        "    case [a, *rest]:\n        r = a\n"
        "    case {'k': v, **kw}:\n        r = v\n"
        "    case _:\n        r = None\n"
        "q = r",
        A(
            inputs=("p", "Point"),
            outputs=("yy", "r", "a", "rest", "v", "kw", "q"),
            maybe_unbound=("yy", "a", "rest", "v", "kw"),
        ),
    ),
    (
        "match-without-default",
        "match p:\n    case 1:\n        r = 1\ns = r",
        A(inputs=("p", "r"), outputs=("r", "s"), maybe_unbound=("r",)),
    ),
    # -- scopes ------------------------------------------------------------------------------
    (
        "comprehension-target-not-leaked",
        "ys = [x * k for x in xs if x]\nz = x",
        A(inputs=("xs", "k", "x"), outputs=("ys", "z")),
    ),
    (
        "nested-comprehension-and-dict",
        "d = {k: [v for v in vs] for k, vs in pairs}",
        A(inputs=("pairs",), outputs=("d",)),
    ),
    (
        "walrus-in-comprehension",
        "hits = [y for x in xs if (y := f(x))]\nlast = y",
        A(inputs=("xs", "f", "y"), outputs=("y", "hits", "last"), maybe_unbound=("y",)),
    ),
    (
        "function-reads-global",
        "def f(a, *args, k=d, **kw):\n    b = a + scale\n    return b + args[0]\n",
        A(inputs=("d", "scale"), outputs=("f",), functions=("f",)),
    ),
    (
        "function-global-bound-before",
        "scale = 2\ndef f(a):\n    return a * scale",
        A(outputs=("scale", "f"), functions=("f",)),
    ),
    (
        "helper-defined-later-is-input",
        "def f():\n    return g()\ndef g():\n    return 1",
        A(inputs=("g",), outputs=("f", "g"), functions=("f", "g")),
    ),
    (
        "recursive-function",
        "def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\nfact(5)",
        A(outputs=("fact",), functions=("fact",), has_last_expr=True),
    ),
    (
        "closure-not-global",
        "def outer():\n    v = 1\n    def inner():\n        return v + w\n    return inner",
        A(inputs=("w",), outputs=("outer",), functions=("outer",)),
    ),
    (
        "global-in-function",
        "def bump():\n    global counter, seen\n    counter += 1\n    seen = True\n",
        A(
            inputs=("counter",),
            outputs=("bump", "counter", "seen"),
            functions=("bump",),
            mutated=("counter",),
            maybe_unbound=("counter", "seen"),
            function_globals=(("bump", ("counter", "seen")),),
        ),
    ),
    (
        "lambda-assigned",
        "key = lambda row: row[col]\nf = lambda: f",
        A(inputs=("col",), outputs=("key", "f"), functions=("key", "f")),
    ),
    (
        "class",
        "class Model(Base, metaclass=Meta):\n    size = default\n    twice = size * 2\n"
        "    def fit(self):\n        return Model, size\n",
        A(inputs=("Base", "Meta", "default", "size"), outputs=("Model",), classes=("Model",)),
    ),
    # -- names -------------------------------------------------------------------------------
    ("builtins-not-inputs", "print(len(range(3)))", A(has_last_expr=True)),
    (
        "builtin-shadowed",
        "list = [1]\nn = len(list)",
        A(outputs=("list", "n")),
    ),
    (
        "annotation-without-value",
        "x: int\ny: Frame = make()\nz = x",
        A(inputs=("make", "Frame", "x"), outputs=("y", "z")),
    ),
    (
        "imports",
        "from __future__ import annotations\nimport numpy.linalg as la\nimport os.path\n"
        "from pandas import DataFrame as DF, Series\nfrom . import sibling",
        A(
            outputs=("la", "os", "DF", "Series", "sibling"),
            imports=("numpy", "os", "pandas"),
        ),
    ),
    (
        "lazy-annotations",
        "from __future__ import annotations\ndef f(x: Frame = d) -> Out:\n    y: Local = x\n",
        A(inputs=("d",), outputs=("f",), functions=("f",)),
    ),
    (
        "star-import",
        "from math import *\nr = sqrt(2)",
        A(inputs=("sqrt",), outputs=("r",), imports=("math",), star_imports=("math",)),
    ),
    (
        "import-in-function",
        "def f():\n    import scipy\n    return scipy",
        A(outputs=("f",), imports=("scipy",), functions=("f",)),
    ),
    # -- last expression -----------------------------------------------------------------------
    ("last-expr", "x = 1\nx", A(outputs=("x",), has_last_expr=True)),
    (
        "last-expr-silenced",
        "x = 1\nx;",
        A(outputs=("x",), has_last_expr=True, last_expr_silenced=True),
    ),
    (
        "semicolon-in-string",
        "s = 'a;'\ns + ';'",
        A(outputs=("s",), has_last_expr=True),
    ),
    (
        "semicolon-in-comment",
        "v  # not silenced;",
        A(inputs=("v",), has_last_expr=True),
    ),
    (
        "silenced-then-comment",
        "v;  # silenced\n\n# trailing note\n",
        A(inputs=("v",), has_last_expr=True, last_expr_silenced=True),
    ),
    ("ends-in-assignment", "v = 1;", A(outputs=("v",))),
    (
        "multiline-last-expr",
        "f(\n    a,\n    'x;',\n);",
        A(inputs=("f", "a"), mutated=("a",), has_last_expr=True, last_expr_silenced=True),
    ),
    ("two-statements-on-a-line", "v;w", A(inputs=("v", "w"), has_last_expr=True)),
    ("empty", "# only a comment\n", A()),
    (
        "top-level-await",
        "r = await fetch()",
        A(inputs=("fetch",), outputs=("r",), top_level_await=1),
    ),
]


@pytest.mark.parametrize(("source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_analyze_cell(source: str, expected: CellAnalysis) -> None:
    assert analyze_cell(source) == expected


@pytest.mark.parametrize(
    "source",
    ["x = = 1", "return 1", "def f(:\n", "a\x00b", "break"],
    ids=["bad-assign", "return-outside-function", "unclosed", "null-byte", "break-outside-loop"],
)
def test_bad_code_raises_syntax_error(source: str) -> None:
    with pytest.raises(SyntaxError):
        analyze_cell(source)


F = FileRead

# IPython source, as a user types it; the test transforms it as the kernel does.
IPYTHON_CASES = [
    (
        "time-line-binds-and-reads",
        "%time x = f(y)",
        A(inputs=("f", "y"), outputs=("x",), mutated=("y",), magics=("%time",), has_last_expr=True),
    ),
    (
        "timeit-reads-only",
        "%timeit -n 10 -r 2 g(w)",
        A(inputs=("g", "w"), mutated=("w",), magics=("%timeit",), has_last_expr=True),
    ),
    (
        "timeit-cell-setup-then-body",
        "%%timeit -n 3 s = setup(k)\nrun(s, m)",
        A(
            inputs=("setup", "k", "run", "m"),
            mutated=("k", "m"),
            magics=("%%timeit",),
            has_last_expr=True,
        ),
    ),
    (
        "time-cell-body-is-the-cell",
        "%%time\nq = h(r)\n!echo {q}\nq",
        A(
            inputs=("h", "r"),
            outputs=("q",),
            mutated=("r",),
            magics=("%%time", "!"),
            has_last_expr=True,
        ),
    ),
    (
        "capture-binds-its-name",
        "%%capture cap --no-stderr\nprint(u)\nv = 1",
        A(inputs=("u",), outputs=("cap", "v"), magics=("%%capture",), has_last_expr=True),
    ),
    (
        "shell-expansions-read",
        "!echo {a + 1} $b $$c\nz = !ls {d}",
        A(inputs=("a", "b", "d"), outputs=("z",), magics=("!", "!!")),
    ),
    (
        "kernel-magics-listed",
        "%matplotlib inline\n%env A=$B",
        A(inputs=("B",), magics=("%matplotlib", "%env"), has_last_expr=True),
    ),
]


@pytest.mark.parametrize(
    ("source", "expected"), [c[1:] for c in IPYTHON_CASES], ids=[c[0] for c in IPYTHON_CASES]
)
def test_ipython_syntax(source: str, expected: CellAnalysis) -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    transform = TransformerManager().transform_cell
    assert analyze_cell(transform(source), transform) == expected


MUTATION_CASES = [
    ("method-call", "results.append(x)\nmodel.fit(X, y)", ("results", "x", "model", "X", "y")),
    ("item-and-attribute", "d[k] = 1\no.a.b = 2\ndel e[0]", ("d", "o", "e")),
    ("passed-to-a-function", "shuffle(items)\nprint(kept)\nn = len(other)", ("items",)),
    ("a-new-object-is-not-the-notebooks", "xs = []\nxs.append(1)", ()),
    ("augmented-item", "counts[w] += 1", ("counts",)),
]


@pytest.mark.parametrize(
    ("source", "mutated"), [c[1:] for c in MUTATION_CASES], ids=[c[0] for c in MUTATION_CASES]
)
def test_names_the_cell_may_change_in_place(source: str, mutated: tuple[str, ...]) -> None:
    assert analyze_cell(source).mutated == mutated


def test_what_a_function_changes_in_place_when_called() -> None:
    source = (
        "stats = {}\n"
        "def bump(n):\n"
        "    global count\n"
        "    count += 1\n"  # rebinds count: not a change in place
        "    stats['calls'] += n\n"
        "    mine = []\n"
        "    mine.append(n)\n"
        "    n.seen = True\n"
        "    def inner():\n"
        "        log.append(1)\n"
        "    return len(big)\n"
        "def look():\n"
        "    return stats['calls']\n"
    )
    assert analyze_cell(source).function_mutated == (("bump", ("stats", "log")),)


FILE_CASES = [
    ("literal", "df = pd.read_csv('a.csv')", (F("pd.read_csv", path="a.csv"),)),
    ("keyword", "a = np.load(file=p)", (F("np.load", name="p"),)),
    (
        "bound-to-a-literal-first",
        "p = 'b.json'\nd = json.load(open(p))",
        (F("open", path="b.json"),),
    ),
    ("pathlib", "t = Path('c.txt').read_text()", (F("Path(...).read_text", path="c.txt"),)),
    ("a-parameter-is-not-a-file", "def f(q):\n    return open(q)", ()),
    ("a-name-bound-by-the-cell-is-not-the-notebooks", "q = g()\nopen(q)", ()),
    ("not-a-reader", "x = f.read()\ny = compute('a.csv')", ()),
]


@pytest.mark.parametrize(
    ("source", "files"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES]
)
def test_files_the_cell_reads(source: str, files: tuple[FileRead, ...]) -> None:
    assert analyze_cell(source).files == files


# -- what the exporter asks of the analysis --------------------------------------------------


def test_each_statement_alone() -> None:
    statements = analyze_statements(
        "a = 1\nb = a + c\nif c:\n    d = b\nprint(e := 2);\nfor m in ms: m.fit(X)"
    )
    assert [s.inputs for s in statements] == [(), ("a", "c"), ("c", "b"), (), ("ms", "X")]
    assert [s.outputs for s in statements] == [("a",), ("b",), ("d",), ("e",), ("m",)]
    assert statements[2].maybe_unbound == ("d",)
    assert [(s.has_last_expr, s.last_expr_silenced) for s in statements][3:] == [
        (True, True),
        (False, False),
    ]
    assert statements[4] == analyze_cell("for m in ms: m.fit(X)")


def test_statements_share_a_line_yet_are_analysed_alone() -> None:
    first, second = analyze_statements("x = y; z = x")
    assert (first.inputs, first.outputs) == (("y",), ("x",))
    assert (second.inputs, second.outputs) == (("x",), ("z",))


@pytest.mark.parametrize("source", ["x = = 1", "return 1", "a\x00b"])
def test_statements_of_bad_code_raise_syntax_error(source: str) -> None:
    with pytest.raises(SyntaxError):
        analyze_statements(source)


@pytest.mark.parametrize(
    ("source", "maybe_unbound"),
    [
        ("if c:\n    x = 1\nelse:\n    x = 2", ()),
        ("with open(p) as fh:\n    data = fh.read()", ()),
        ("x = 1\ndel x", ("x",)),
        ("ok = f() and (y := 1)", ("y",)),
        ("def f():\n    global g\n    g = 1", ("g",)),
        ("g = 0\ndef f():\n    global g\n    g = 1", ()),
    ],
    ids=["both-branches", "with-body", "deleted", "walrus-behind-and", "global-only", "bound-too"],
)
def test_outputs_the_cell_may_finish_without(source: str, maybe_unbound: tuple[str, ...]) -> None:
    assert analyze_cell(source).maybe_unbound == maybe_unbound


def test_global_declarations_under_every_function_they_are_in() -> None:
    source = (
        "global top\n"  # at the top level: nothing to report
        "class C:\n"
        "    def m(self):\n"
        "        global a\n"
        "def outer():\n"
        "    def inner():\n"
        "        global b, c\n"
        "    global d\n"
    )
    assert analyze_cell(source).function_globals == (
        ("m", ("a",)),
        ("outer", ("d",)),
        ("outer", ("b", "c")),
        ("inner", ("b", "c")),
    )


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("x = 1\nr = await fetch()", 2),
        ("async for v in stream():\n    pass", 1),
        ("import x\nasync with lock:\n    pass", 2),
        ("vs = [v async for v in stream()]", 1),
        ("ys = [await g(x) for x in xs]\nawait h()", 1),
        ("async def f():\n    await g()\nlambda: 1", None),
        ("class C:\n    async def m(self):\n        await g()", None),
    ],
    ids=["await", "async-for", "async-with", "async-comprehension", "first", "function", "method"],
)
def test_the_first_top_level_await(source: str, line: int | None) -> None:
    assert analyze_cell(source).top_level_await == line


@pytest.mark.parametrize(
    ("source", "loops_over"),
    [
        ("for m in models:\n    m.fit(X)", ("models",)),
        ("for k, v in d.items():\n    v.x = k\nfor v in e.values():\n    pass", ("d", "e")),
        ("for i in range(3):\n    pass\nfor x in a.b:\n    pass", ()),
        ("if c:\n    for m in models:\n        pass", ()),
        ("def f():\n    for m in models:\n        pass", ()),
    ],
    ids=["name", "items-and-values", "not-a-name", "nested-in-a-block", "in-a-function"],
)
def test_names_top_level_loops_run_over(source: str, loops_over: tuple[str, ...]) -> None:
    assert analyze_cell(source).loops_over == loops_over


@pytest.mark.parametrize(
    ("source", "unpicklable"),
    [
        ("g = (x for x in xs)\nfh = open('a')\nn = len(xs)", ("g", "fh")),
        ("a, b = (x for x in xs), open('a')\nc = d = open('b')", ()),
        ("if c:\n    g = (x for x in xs)\ndef f():\n    h = open('a')", ()),
        ("fh = io.open('a')\nl = [x for x in xs]", ()),
    ],
    ids=["generator-and-file", "not-one-name", "not-top-level", "not-open-nor-a-generator"],
)
def test_names_bound_to_values_no_pickle_carries(source: str, unpicklable: tuple[str, ...]) -> None:
    assert analyze_cell(source).unpicklable == unpicklable


@pytest.mark.parametrize(
    ("source", "call"),
    [
        ("get_ipython().run_line_magic('time', 'x = 1')", ("run_line_magic", ["time", "x = 1"])),
        ("get_ipython().system('ls')", ("system", ["ls"])),
        ("get_ipython().run_line_magic('time', line)", None),
        ("get_ipython().system('ls', depth=1)", None),
        ("get_ipython().user_ns", None),
        ("shell().system('ls')", None),
    ],
    ids=["line-magic", "system", "computed-argument", "keyword", "not-a-call", "not-ipython"],
)
def test_ipython_calls_are_recognised(source: str, call: tuple[str, list[str]] | None) -> None:
    node = ast.parse(source, mode="eval").body
    assert ipython_call(node) == call
    assert is_get_ipython(node) is False
    assert any(is_get_ipython(n) for n in ast.walk(node)) == source.startswith("get_ipython")
