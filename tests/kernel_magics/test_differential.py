"""The same cell run plainly and as a ``%%task`` gives the same namespace and output.

Two real kernels share the module: ``L`` runs each generated cell plainly, ``T`` runs it under
``%%task`` on a real scheduler and worker (processes on 127.0.0.1). Before each example both are
``%reset -f``; both run the same setup cell, then the cell, then a probe of every name (see
``differential.py``), then a later plain cell and the probe again. The generator draws values
from a vocabulary of what notebooks hold (aliased containers, dicts sharing keys, arrays around
and over 1 MiB, views, structured arrays, frames with string columns, dataclasses, enums,
namedtuples, classes with class-level state, mutable defaults, decorated functions, closures,
generators, files) and operations on them (read, change in place, rebind, alias, delete, raise
after changing). The named tests after it are the reported cases, each one fixed example.

``TASKCELL_DIFFERENTIAL_EXAMPLES=N`` draws about N examples in all instead of the default
(:data:`EXAMPLES`), shared out among the generated tests; an example takes about a second.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from differential import PRELUDE, Example, Pair, Seen, check
from generated_cells import FOCUSES, VOCABULARY, examples
from hypothesis import HealthCheck, given, settings

pytestmark = pytest.mark.slow

#: Examples the generated tests draw in all, shared out among the vocabulary's kinds;
#: ``TASKCELL_DIFFERENTIAL_EXAMPLES`` for a longer run.
EXAMPLES = int(os.environ.get("TASKCELL_DIFFERENTIAL_EXAMPLES", "72"))
EACH = max(1, -(-EXAMPLES // len(FOCUSES)))


@pytest.fixture(scope="module")
def pair(module_dask, tmp_path_factory) -> Iterator[Pair]:
    """The two kernels, and one worker of one thread for ``T``'s cells."""
    module_dask.worker(name="differential")
    module_dask.wait_for_workers(1)
    folders = (str(tmp_path_factory.mktemp("plain")), str(tmp_path_factory.mktemp("task")))
    kernels = Pair(module_dask.address, folders)
    try:
        yield kernels
    finally:
        kernels.stop()


@pytest.mark.timeout(1800 + 60 * EACH)
@pytest.mark.parametrize("focus", FOCUSES)
def test_a_task_cell_means_what_the_cell_means(pair, focus):
    """Generated cells mean the same with and without ``%%task``. Each kind of value is a test
    of its own, so each fails on its own, with its own smallest example."""

    @settings(
        max_examples=EACH,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(example=examples(focus))
    def means_the_same(example: Example) -> None:
        check(pair, example)

    means_the_same()


# --- The reported cases, one fixed example each ---------------------------------------------


def test_dicts_sharing_a_key_keep_their_own_arrays_over_a_mebibyte(pair):
    check(
        pair,
        Example(
            setup="d1 = {'k': np.zeros(200_000)}\nd2 = {'k': np.ones(200_000)}",
            cell="s = (float(d1['k'].sum()), float(d2['k'].sum()))\nprint(s)",
            later="print(s, d1['k'][:2], d2['k'][:2])",
        ),
        refusal_allowed=False,
    )


def test_a_list_of_20000_small_dicts_as_input(pair):
    check(
        pair,
        Example(
            setup="items = [{'i': i, 'name': f'item-{i:05d}', 'tags': [i]} for i in range(20_000)]",
            cell="items[0]['tags'].append(99)\ntotal = sum(r['i'] for r in items)\nprint(total)",
            later="print(items[0], total)",
        ),
        refusal_allowed=False,
    )


def test_a_notebook_dataclass_keeps_its_repr_after_a_task_cell_uses_it(pair):
    check(
        pair,
        Example(
            setup="@dataclass\nclass Point:\n    x: int\n    y: int\n\np = Point(1, 2)",
            cell="p.x = 10\nq = Point(3, 4)",
            later="print(repr(Point(1, 2)), repr(p), repr(q), type(q) is Point)",
        ),
        refusal_allowed=False,
    )


@pytest.mark.parametrize(
    "kind",
    ["contextmanager", "wraps", "lru_cache"],
    ids=["a-contextmanager-helper", "a-functools-wraps-wrapper", "an-lru-cache-function"],
)
def test_a_decorated_notebook_function_works_in_a_task_cell(pair, kind):
    cells = {
        "contextmanager": ("with tagged('a') as t:\n    print(t)", "print(trail)"),
        "wraps": ("y = double(21)\nprint(y, double.__name__)", "print(calls, double(1))"),
        "lru_cache": ("f = fib(20)\nprint(f)", "print(fib(5), f)"),
    }
    (entity,) = VOCABULARY[kind]
    cell, later = cells[kind]
    check(pair, Example(setup=entity.setup, cell=cell, later=later), refusal_allowed=False)


def test_a_classmethod_appending_to_class_state_keeps_the_change(pair):
    (entity,) = VOCABULARY["class_state"]
    check(
        pair,
        Example(
            setup=entity.setup,
            cell="Registry.add(5)\nn_items = Registry.add('a')",
            later="print(Registry.items, n_items)",
        ),
        refusal_allowed=False,
    )


def test_a_mutable_default_keeps_what_a_call_appended(pair):
    (entity,) = VOCABULARY["mutable_defaults"]
    check(
        pair,
        Example(setup=entity.setup, cell="acc(1)\ngot = acc(2)", later="print(acc(0), got)"),
        refusal_allowed=False,
    )


def test_a_change_through_a_view_shows_in_its_base(pair):
    (entity, _) = VOCABULARY["views"]
    check(
        pair,
        Example(
            setup=entity.setup,
            cell="view[0] = -5\nprint(base[2])",
            later="print(base, view, view.base is base)",
        ),
        refusal_allowed=False,
    )


# --- Shapes met outside the generator, one fixed example each -----------------------------

#: name -> (setup, task cell, later plain cell): values and operations a notebook holds that
#: the vocabulary above does not make (slots, cycles, structured arrays, inputs put in new
#: containers, views of inputs, partials, keys and members of equal value, trees whose nodes
#: point at their parents), each compared by the probe like a generated example.
SHAPES = {
    "inputs_in_new_containers": (
        "a = [1]\nb = {'x': a, 't': (1, 2)}\narr = np.arange(10.0)\n"
        "def add(x, y): return x + y\nclass K: pass\nk = K()",
        "pair = [a, b]\nt = b['t']\nv = arr[2:5]\np = functools.partial(add, 1)\nkk = {'k': k}",
        "print(pair[0] is a, pair[1] is b, t is b['t'], v.base is arr, p.func is add)",
    ),
    "tree_with_parents": (
        "class Node:\n"
        "    def __init__(self, parent=None):\n"
        "        self.parent, self.children = parent, []\n"
        "        if parent: parent.children.append(self)\n"
        "root = Node()\nkid = Node(root)",
        "k2 = Node(kid)\nkid.name = 'kid'\nloop = [1]\nloop.append(loop)",
        "print(k2.parent is kid, kid.children[0] is k2, loop[1] is loop, kid.name)",
    ),
    "slots": (
        (
            "class P:\n"
            "    __slots__ = ('x', 'y')\n"
            "    def __init__(self): self.x, self.y = 1, [2]\n"
            "p = P()"
        ),
        "p.x = 5\np.y.append(3)\nq = p",
        "print(p.x, p.y, q is p)",
    ),
    "cycle": (
        "a = []\na.append(a)\nd = {'self': None}\nd['self'] = d",
        "a.append(1)\nd['n'] = 2\ne = d['self']",
        "print(len(a), a[0] is a, e is d)",
    ),
    "defaultdict": (
        "dd = collections.defaultdict(lambda: [0])",
        "dd['a'].append(1)\nx = dd['b']",
        "print(dict(dd), dd['c'])",
    ),
    "ordered": (
        "od = collections.OrderedDict(a=1, b=2, c=3)",
        "od.move_to_end('a')\nod['d'] = 4",
        "print(list(od))",
    ),
    "df_newcol": (
        "df = pd.DataFrame({'a': [1, 2, 3], 's': ['x', 'y', None]})",
        "df['b'] = df['a'] * 2\ndf.loc[0, 's'] = 'z'\ndf.attrs['k'] = 1",
        "print(df, df.attrs)",
    ),
    "structured": (
        "sa = np.zeros(3, dtype=[('a', 'i4'), ('b', 'f8')])",
        "sa['a'][1] = 7\nsa[2]['b'] = 1.5\nv = sa['a']",
        "print(sa, v.base is sa)",
    ),
    "global_fn": (
        "counter = 0\ndef bump():\n    global counter\n    counter += 1\n    return counter",
        "bump()\nbump()\nr = bump()",
        "print(counter, r, bump())",
    ),
    "enum": (
        "class Color(enum.Enum):\n    RED = 1\n    BLUE = 2",
        "c = Color.RED\nm = {Color.BLUE: 'b'}",
        "print(c is Color.RED, m[Color.BLUE], type(c) is Color)",
    ),
    "nonlocal": (
        (
            "def make():\n"
            "    n = 0\n"
            "    def inc():\n"
            "        nonlocal n\n"
            "        n += 1\n"
            "        return n\n"
            "    return inc\n"
            "inc = make()"
        ),
        "inc()\nk = inc()",
        "print(k, inc())",
    ),
    "classattr_rebind": (
        (
            "class Config:\n"
            "    debug = False\n"
            "    opts = {}\n"
            "    @classmethod\n"
            "    def on(cls): cls.debug = True"
        ),
        "Config.on()\nConfig.opts['x'] = 1\nConfig.level = 3",
        "print(Config.debug, Config.opts, getattr(Config, 'level', None))",
    ),
    "new_subclass": (
        "class Base:\n    def who(self): return 'base'",
        "class Sub(Base):\n    def who(self): return 'sub'\ns = Sub()",
        "print(s.who(), isinstance(s, Base), type(s).__mro__[1] is Base)",
    ),
    "fn_closure_nb": (
        "factor = 3",
        "def scale(v): return v * factor\nr = scale(2)",
        "factor = 10\nprint(scale(2), r)",
    ),
    "tuple_lists": (
        "t = ([1], [2])\nfs = frozenset({(1, 2), (3, 4)})",
        "t[0].append(5)\nu = t\nw = fs | {(5, 6)}",
        "print(t, u is t, sorted(w))",
    ),
    "categorical": (
        "s = pd.Series(['a', 'b', 'a'], dtype='category')",
        "s[1] = 'a'\nc = s.cat.codes",
        "print(s.tolist(), c.tolist(), s.dtype)",
    ),
    "frozen_dc": (
        (
            "@dataclass(frozen=True)\n"
            "class F:\n"
            "    x: int\n"
            "    tags: list = field(default_factory=list)\n"
            "f = F(1)"
        ),
        "f.tags.append('t')\ng = F(2)\nh = {f, }",
        "print(f, g, len(h), type(g) is F)",
    ),
    "int_rebind": ("n = 5\nm = n", "n += 1\ndel m", "print(n, 'm' in dir())"),
    "big_alias": (
        "a = np.zeros(300_000)\nb = a\nc = a[:10]",
        "b[0] = 1\nc[1] = 2",
        "print(a[:3], b is a, c.base is a)",
    ),
    "property": (
        (
            "class Temp:\n"
            "    def __init__(self): self._c = 0\n"
            "    @property\n"
            "    def c(self): return self._c\n"
            "    @c.setter\n"
            "    def c(self, v): self._c = v\n"
            "t = Temp()"
        ),
        "t.c = 5\nk = t.c",
        "print(t.c, k, type(t) is Temp)",
    ),
    "count_iter": (
        "import itertools\nit = itertools.count(5)",
        "a = next(it)\nb = next(it)",
        "print(a, b, next(it))",
    ),
    "mutate_then_raise": ("lst = [1]", "lst.append(2)\nraise ValueError('boom')", "print(lst)"),
    "partial": (
        "def add(a, b): return a + b\nadd5 = functools.partial(add, 5)",
        "r = add5(1)\nadd6 = functools.partial(add, 6)",
        "print(r, add6(1), add5.func is add)",
    ),
    "class_counter": (
        (
            "class Node:\n"
            "    count = 0\n"
            "    def __init__(self):\n"
            "        Node.count += 1\n"
            "        self.id = Node.count"
        ),
        "a = Node()\nb = Node()",
        "print(Node.count, a.id, b.id, type(a) is Node)",
    ),
    "nested_fn_default": (
        "def acc(x, into=[]):\n    into.append(x)\n    return into",
        "acc(1)\nr = acc(2)",
        "print(r, acc(3), acc.__defaults__)",
    ),
    "set_mut": ("s = {1, 2}\nt = s", "s.add(3)\nt.discard(1)", "print(sorted(s), t is s)"),
    "series_view": (
        "df = pd.DataFrame({'a': np.arange(5.0)})\ncol = df['a']",
        "df.loc[0, 'a'] = 9.0\nx = col[0]",
        "print(df['a'].tolist(), x)",
    ),
    "bytearray": (
        "ba = bytearray(b'abc')\nmv = memoryview(ba)",
        "ba[0] = 65\nn = len(ba)",
        "print(ba, n)",
    ),
    "complex_key_dict": (
        "k1 = (1, 'a')\nd = {k1: [1]}",
        "d[(1, 'a')].append(2)\nd[(2, 'b')] = []",
        "print(d)",
    ),
    "namedtuple_new": (
        "Pt = collections.namedtuple('Pt', 'x y')\np = Pt(1, 2)",
        "q = p._replace(x=5)\nr = Pt(3, 4)",
        "print(q, r, type(r) is Pt, isinstance(q, tuple))",
    ),
    "dc_inherit": (
        (
            "@dataclass\n"
            "class A:\n"
            "    x: int = 0\n"
            "@dataclass\n"
            "class B(A):\n"
            "    y: list = field(default_factory=list)\n"
            "b = B()"
        ),
        "b.x = 3\nb.y.append(1)\nc = B(1, [2])",
        "print(b, c, isinstance(c, A), type(c) is B)",
    ),
    "lambda_in_an_input": (
        "class K:\n    def f(self): return 1\nk = K()\nbase = 10",
        "k.f = lambda: base + 2\nr = k.f()",
        "base = 20\nprint(k.f(), r, K().f())",
    ),
    "typing_namedtuple": (
        "from typing import NamedTuple\nclass P(NamedTuple):\n    x: int\n    y: int = 0\np = P(1)",
        "q = p._replace(y=3)\nt = P(5, 6)",
        "print(p, q, t, type(t) is P)",
    ),
    "series_in_a_dict": (
        "s = pd.Series([1, 2, 3])\nd = {'s': s}",
        "d['s'][0] = 100\nt = int(s.sum())",
        "print(s.tolist(), t, d['s'] is s)",
    ),
    "cached_property": (
        "class S:\n    @functools.cached_property\n    def big(self): return [1, 2]\ns = S()",
        "s.big.append(3)\nv = s.big",
        "print(s.big, v is s.big)",
    ),
    "composite_flag": (
        "class Perm(enum.IntFlag):\n    R = 4\n    W = 2\np = Perm.R",
        "p |= Perm.W\nq = Perm.R | Perm.W",
        "print(p, q, p == q, Perm(6))",
    ),
    "a_new_tuple_holding_a_changed_input": (
        "a = [1]\nb = {'k': 1}",
        "t = (a, b)\nb['k'] = 2",
        "print(t, t[0] is a, t[1] is b)",
    ),
    "an_input_held_by_a_changed_input": (
        "fs = frozenset({(1, 2), (3, 4)})\nlst = [fs]",
        "lst.append(frozenset({(5, 6)}))\nu = fs | {(7, 8)}",
        "print(lst, sorted(u), lst[0] is fs)",
    ),
    "dict_subclass_with_getattr": (
        "class AD(dict):\n    def __getattr__(self, k): return self[k]\nad = AD(a=1)",
        "ad['b'] = 2\nv = ad.a + ad.b",
        "print(ad, v, type(ad).__name__)",
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_shape_means_what_the_cell_means(pair, shape):
    setup, cell, later = SHAPES[shape]
    check(pair, Example(setup=setup, cell=cell, later=later), refusal_allowed=False)


def test_a_singledispatch_function_dispatches_in_a_task_cell(pair):
    """Compared by what it prints: its dispatch cache (Python's, filled by calls) differs."""
    setup = (
        "@functools.singledispatch\ndef show(x): return 'any'\n\n"
        "@show.register\ndef _(x: int): return 'int'"
    )
    pair.both(f"%reset -f\n{PRELUDE}\n{setup}", f"%reset -f\n{PRELUDE}\n{setup}")
    cell = "r = (show(1), show('a'), show(2.5))\nprint(r)"
    plain, task = (Seen.of(o) for o in pair.both(cell, f"%%task\n{cell}"))
    assert task.status == "ok", task
    assert task.streams == plain.streams == (("stdout", "('int', 'any', 'any')\n"), ("stderr", ""))


def test_a_view_of_an_input_that_is_not_contiguous_comes_back_with_its_values(pair):
    """Such an input travels as a contiguous copy: a view of it comes back as its own array
    (not a view of the notebook's), with the values the notebook would see."""
    task = pair.task
    assert task is not None
    setup = f"%reset -f\n{PRELUDE}\nbig = np.arange(20.0)\nx = big[::2]\nm = big.reshape(4, 5).T"
    assert task.run(setup).status == "ok"
    out = task.run("%%task\ny = x[1:3]\nz = m[1:3, 0]\nw = m.T[2]")
    assert out.status == "ok", out.error_text
    assert task.value("(y.tolist(), z.tolist(), w.tolist())") == (
        [2.0, 4.0],
        [1.0, 2.0],
        [10.0, 11.0, 12.0, 13.0, 14.0],
    )


def test_a_change_beside_a_singledispatch_function_comes_back(pair):
    """cloudpickle alone cannot pickle such a function (its cache holds weak references): the
    input holding it must still be judged changed, and what the cell bound of it be the
    notebook's changed list."""
    task = pair.task
    assert task is not None
    setup = (
        f"%reset -f\n{PRELUDE}\n@functools.singledispatch\ndef show(x): return 'any'\n\n"
        "cfg = {'f': show, 'v': []}"
    )
    assert task.run(setup).status == "ok"
    out = task.run("%%task\ncfg['v'].append(1)\nout = cfg['v']")
    assert out.status == "ok", out.error_text
    assert task.value("(out is cfg['v'], cfg['v'], cfg['f']('a'))") == (True, [1], "any")
