"""The cells of the differential checks: what notebooks hold, and generated cells over it.

Shared by ``tests/kernel_magics/test_differential.py`` (a cell run plainly and as ``%%task`` in
two kernels) and ``tests/export/test_export_differential.py`` (a notebook and its exported
modules): the :data:`VOCABULARY` of values a setup cell defines and what a cell may do with
them, the :func:`examples` strategy drawing an :class:`Example` from it, the :data:`PRELUDE`
every example imports first and the :data:`PROBE` that describes every name of the notebook.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from hypothesis import strategies as st

#: What every example's kernels import before its setup cell; modules are not compared.
PRELUDE = """\
import collections, contextlib, dataclasses, enum, functools, itertools, sys
from dataclasses import dataclass, field
import numpy as np
import pandas as pd
"""

#: The probe's function, ``_taskcell_probe(ns, home)``: prints ``PROBE-JSON`` and a description
#: of every name in ``ns``. An object with an identity is described where the walk first meets it
#: (names in sorted order); wherever else it is met, it is ``{"same as": PATH}``, the path where
#: it was first met. A function whose globals are ``home`` (the notebook's) reads "notebook".
PROBE_FUNCTION = r"""
def _taskcell_probe(ns, home):
    import enum, functools, hashlib, inspect, io, json, re, sys, types
    np = sys.modules.get("numpy")
    pd = sys.modules.get("pandas")
    hidden = {"In", "Out", "exit", "quit", "get_ipython"}
    atoms = (type(None), bool, int, float, complex, str, bytes)
    address = re.compile(r" at 0x[0-9a-fA-F]+")
    first_met, keep, based = {}, [], []

    def shown(value):
        try:
            return address.sub(" at 0x…", repr(value))
        except Exception as e:
            return f"<repr raised {type(e).__name__}: {e}>"

    def named(t):
        return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', '?')}"

    def notebooks(obj):
        return getattr(obj, "__module__", None) == "__main__"

    def canon(value, path):
        if type(value) in atoms:
            return shown(value)
        if isinstance(value, types.ModuleType):
            return ["module", value.__name__]
        if isinstance(value, type) and not notebooks(value):
            return ["type", named(value)]
        if isinstance(value, types.BuiltinFunctionType) or (
            isinstance(value, types.FunctionType) and not notebooks(value)
        ):
            return ["function", named(value)]
        if path.count(".") + path.count("[") > 24:
            return ["deep", named(type(value))]
        if id(value) in first_met:
            return {"same as": first_met[id(value)]}
        first_met[id(value)] = path
        keep.append(value)
        return describe(value, path)

    def kind(value, path):
        t = type(value)
        return canon(t, f"type({path})") if notebooks(t) else named(t)

    def function(f, path):
        closure = []
        for i, c in enumerate(f.__closure__ or ()):
            try:
                closure.append(canon(c.cell_contents, f"{path}.<closure {i}>"))
            except ValueError:
                closure.append("<empty cell>")
        g = f.__globals__
        return {
            "function": f.__qualname__,
            "globals": "notebook" if g is home else g.get("__name__", "?"),
            "defaults": canon(f.__defaults__, f"{path}.__defaults__"),
            "kwdefaults": canon(f.__kwdefaults__, f"{path}.__kwdefaults__"),
            "closure": closure,
            "wrapped": canon(f.__dict__.get("__wrapped__"), f"{path}.__wrapped__"),
            "dict": canon(
                {k: v for k, v in f.__dict__.items() if k != "__wrapped__"}, f"vars({path})"
            ),
        }

    def items(pairs, path):
        out = []
        for i, (k, v) in enumerate(pairs):
            step = f"[{shown(k)}]" if type(k) in atoms else f".<item {i}>"
            out.append([canon(k, f"{path}.<key {i}>"), canon(v, path + step)])
        return out

    def describe(value, path):
        t = type(value)
        if isinstance(value, type):
            attrs, others = {}, []
            skip = ("__dict__", "__weakref__", "__doc__", "__module__", "__slotnames__")
            for k, v in vars(value).items():
                if k in skip:  # __slotnames__: a cache pickling an instance leaves on its class
                    continue
                if isinstance(v, types.FunctionType):
                    attrs[k] = canon(v, f"{path}.{k}")
                elif k.startswith("_") or hasattr(v, "__get__"):
                    others.append(k)
                else:
                    attrs[k] = canon(v, f"{path}.{k}")
            return {
                "class": value.__qualname__,
                "bases": [canon(b, f"{path}.__bases__[{i}]")
                          for i, b in enumerate(value.__bases__)],
                "attrs": attrs,
                "others": sorted(others),
            }
        if isinstance(value, enum.Enum):
            return {"enum": kind(value, path), "name": value.name,
                    "value": canon(value.value, f"{path}.value")}
        if isinstance(value, types.FunctionType):
            return function(value, path)
        if isinstance(value, functools._lru_cache_wrapper):
            # Not its cache_info(): a task cell's calls fill the worker's cache, never the
            # notebook's (the README says so), and results do not depend on it.
            return {
                "lru_cache": getattr(value, "__qualname__", "?"),
                "wrapped": canon(value.__wrapped__, f"{path}.__wrapped__"),
            }
        if isinstance(value, functools.partial):
            return {"partial": canon(value.func, f"{path}.func"),
                    "args": canon(value.args, f"{path}.args"),
                    "keywords": canon(value.keywords, f"{path}.keywords")}
        if isinstance(value, types.MethodType):
            return {"method": value.__func__.__qualname__,
                    "self": canon(value.__self__, f"{path}.__self__"),
                    "func": canon(value.__func__, f"{path}.__func__")}
        if isinstance(value, types.GeneratorType):
            return {"generator": value.__qualname__, "state": inspect.getgeneratorstate(value)}
        if isinstance(value, io.IOBase):
            return {"file": named(t), "name": shown(getattr(value, "name", None)),
                    "mode": shown(getattr(value, "mode", None)), "closed": value.closed,
                    "at": None if value.closed else value.tell()}
        if np is not None and isinstance(value, np.ndarray):
            chain, base = [], value.base
            while base is not None:
                keep.append(base)
                chain.append(id(base))
                base = getattr(base, "base", None)
            if value.dtype.hasobject or value.size <= 64:
                data = canon(value.tolist(), f"{path}.tolist()")
            else:
                data = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
            node = {"ndarray": kind(value, path), "dtype": str(value.dtype),
                    "shape": list(value.shape), "writeable": bool(value.flags.writeable),
                    "data": data}
            based.append((node, chain))
            return node
        if np is not None and isinstance(value, np.generic):
            return {"scalar": named(t), "value": shown(value.item())}
        if pd is not None and isinstance(value, pd.DataFrame):
            return {"frame": kind(value, path), "dtypes": [str(d) for d in value.dtypes],
                    "data": canon(value.to_dict(orient="split"), f"{path}.to_dict()"),
                    "attrs": canon(value.attrs, f"{path}.attrs")}
        if pd is not None and isinstance(value, (pd.Series, pd.Index)):
            return {"series": kind(value, path), "dtype": str(value.dtype),
                    "name": canon(value.name, f"{path}.name"),
                    "index": canon(getattr(value, "index", value).tolist(), f"{path}.index"),
                    "values": canon(value.tolist(), f"{path}.tolist()")}
        if isinstance(value, (list, tuple)):
            node = {"seq": kind(value, path),
                    "items": [canon(v, f"{path}[{i}]") for i, v in enumerate(value)]}
            if hasattr(value, "__dict__"):
                node["state"] = canon(vars(value), f"vars({path})")
            return node
        if isinstance(value, dict):
            return {"map": kind(value, path), "items": items(value.items(), path)}
        if isinstance(value, (set, frozenset)):
            members = sorted(value, key=shown)
            return {"set": kind(value, path),
                    "items": [canon(v, f"{path}.<member {i}>") for i, v in enumerate(members)]}
        node = {"object": kind(value, path)}
        if notebooks(t):
            node["repr"] = shown(value)
        if hasattr(value, "__dict__"):
            node["state"] = canon(vars(value), f"vars({path})")
        elif not notebooks(t):
            node["repr"] = shown(value)
        return node

    names = {}
    for name in sorted(ns):
        value = ns[name]
        if name.startswith("_") or name in hidden or isinstance(value, types.ModuleType):
            continue
        names[name] = canon(value, name)
    for node, chain in based:
        node["base"] = next((first_met[i] for i in chain if i in first_met), None)
    print("PROBE-JSON" + json.dumps(names, default=shown))
"""

#: The probe cell of a kernel: every name of the notebook.
PROBE = f"""{PROBE_FUNCTION}

_taskcell_probe(get_ipython().user_ns, get_ipython().user_ns)
del _taskcell_probe
"""


@dataclass(frozen=True)
class Example:
    """One generated notebook: a setup cell, the cell run plainly or as a task, a later plain
    cell; ``travel_less`` are the setup's names that cannot be sent to a worker."""

    setup: str
    cell: str
    later: str = ""
    travel_less: frozenset[str] = frozenset()

    def __str__(self) -> str:
        parts = [f"# setup\n{self.setup}", f"# cell (plain in L; %%task in T)\n{self.cell}"]
        if self.later:
            parts.append(f"# later plain cell\n{self.later}")
        return "\n".join(parts)


def code(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


# --- The vocabulary -------------------------------------------------------------------------


@dataclass(frozen=True)
class Entity:
    """Values a setup cell defines, and what a cell may do with them.

    ``ops`` are statements for the cell, ``values`` expressions that may end it (its
    ``Out[]``), ``later`` statements for the plain cell after it. ``travel_less`` are the
    names that cannot be sent to a worker: a task cell reading one may be refused by name.
    """

    kind: str
    setup: str
    ops: tuple[str, ...]
    values: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    travel_less: frozenset[str] = frozenset()


def aliases() -> list[Entity]:
    return [
        Entity(
            "aliases",
            'a = [1]\nb = {"x": a, "y": a}',
            (
                "a.append(2)",
                'b["x"].append(3)',
                'b["z"] = a',
                'b["y"] = [9]',
                "print(b)",
                "a = a + [4]",
                'c = b["x"]',
                "del b",
            ),
            ("b", 'a is b["y"]'),
            ('print(a is b["x"], b)',),
        )
    ]


def shared_keys() -> list[Entity]:
    """Two dicts with the same key, their arrays below, at and over 1 MiB (float64)."""
    return [
        Entity(
            "shared_keys",
            f"d1 = {{'k': np.zeros({n})}}\nd2 = {{'k': np.ones({n})}}",
            (
                "s = (float(d1['k'].sum()), float(d2['k'].sum()))",
                "print(float(d1['k'].sum()), float(d2['k'].sum()))",
                "d1['k'][0] = 7.0",
                "d2['k'] += 1",
                "d1['k'] = d2['k']",
                "d2['head'] = d1['k'][:4]",
            ),
            ("float(d1['k'][0] + d2['k'][-1])",),
            ("print(float(d1['k'].sum()), float(d2['k'].sum()), d1['k'] is d2['k'])",),
        )
        for n in (3, 131_000, 131_072, 200_000)
    ]


def records() -> list[Entity]:
    """A list of small dicts, a few and 20,000 (over 1 MiB pickled)."""
    return [
        Entity(
            "records",
            f"items = [{{'i': i, 'name': f'item-{{i:05d}}', 'tags': [i]}} for i in range({n})]",
            (
                "items.append({'i': -1, 'name': 'new', 'tags': []})",
                "items[0]['tags'].append(99)",
                "total = sum(r['i'] for r in items)",
                "print(len(items), items[-1])",
                "print('checked', len(items), file=sys.stderr)",
                "items.sort(key=lambda r: -r['i'])",
                "first = items[0]",
            ),
            ("len(items)", "items[:2]"),
            ("print(len(items), items[0], items[-1])",),
        )
        for n in (1, 3, 20_000)
    ]


def sequences() -> list[Entity]:
    """A tuple of lists and a set, small and 20,000 long."""
    return [
        Entity(
            "sequences",
            f"tup = tuple([i] for i in range({n}))\nbag = set(range({n}))",
            (
                "tup[0].append(-1)",
                "print(len(tup), tup[:2])",
                "tup = tup + ([7],)",
                "bag.add(-1)",
                "bag.discard(0)",
                "print(len(bag), min(bag))",
                "frozen = frozenset(bag)",
                "pair_of = (tup, tup)",
            ),
            ("tup[:3]", "len(bag)"),
            ("print(tup[0], len(bag))",),
        )
        for n in (1, 3, 20_000)
    ]


def views() -> list[Entity]:
    return [
        Entity(
            "views",
            f"base = np.arange({n})\nview = base[2:5]",
            (
                "view[0] = -5",
                "print(base[2])",
                "base[3] = 42",
                "print(view.tolist())",
                "view = view.copy()",
                "base += 1",
            ),
            ("int(view[0])", "view"),
            ("print(base[:6], view, view.base is base)",),
        )
        for n in (10, 200_000)
    ]


def structured() -> list[Entity]:
    return [
        Entity(
            "structured",
            "rec = np.zeros(3, dtype=[('x', 'i4'), ('y', 'f8')])",
            ("rec['x'][1] = 5", "rec[0] = (1, 2.5)", "print(rec)", "col = rec['y']"),
            ("rec",),
            ("print(rec, rec.dtype)",),
        )
    ]


def frames() -> list[Entity]:
    """A frame with an object (string) column, small and over 1 MiB."""
    return [
        Entity(
            "frames",
            f"df = pd.DataFrame({{'name': [f'row-{{i}}' for i in range({n})], 'n': range({n})}})",
            (
                "df['shout'] = df['name'].str.upper()",
                "df.loc[0, 'name'] = 'z'",
                "print(df.head(3).to_string())",
                "df = df[df.n > 1]",
                "col = df['name']",
                "df.attrs['note'] = 'x'",
            ),
            ("df.head(3)", "df.shape"),
            ("print(df.head(3).to_string(), df.shape)",),
        )
        for n in (3, 50_000)
    ]


def dataclasses_() -> list[Entity]:
    return [
        Entity(
            "point",
            code("""
                @dataclass
                class Point:
                    x: int
                    y: int

                p = Point(1, 2)
            """),
            (
                "p.x = 10",
                "q = Point(3, 4)",
                "pts = [Point(i, -i) for i in range(2)]",
                "print(p)",
                "p = Point(5, 6)",
            ),
            ("p", "Point(7, 8)"),
            ("print(repr(Point(1, 2)))", "print(repr(p), type(p) is Point)"),
        ),
        Entity(
            "point",
            code("""
                @dataclass
                class Bag:
                    label: str
                    things: list = field(default_factory=list)

                held = Bag('held')
            """),
            ("held.things.append(1)", "spare = Bag('spare', [2])", "print(held)"),
            ("held", "Bag('new')"),
            ("print(repr(Bag('later')), held)",),
        ),
    ]


def enums() -> list[Entity]:
    return [
        Entity(
            "enums",
            code("""
                class Color(enum.Enum):
                    RED = 1
                    GREEN = 2

                Pair = collections.namedtuple('Pair', 'left right')
                fav = Color.RED
                pr = Pair(1, [2])
            """),
            (
                "fav = Color.GREEN",
                "pr.right.append(3)",
                "same = fav is Color.RED",
                "print(pr, fav)",
                "pr2 = Pair(fav, 0)",
            ),
            ("pr", "fav"),
            ("print(fav is Color.RED, type(pr) is Pair, Color(2), pr)",),
        )
    ]


def class_state() -> list[Entity]:
    return [
        Entity(
            "class_state",
            code("""
                class Registry:
                    items = []

                    @classmethod
                    def add(cls, x):
                        cls.items.append(x)
                        return len(cls.items)
            """),
            (
                "Registry.add(5)",
                "n_items = Registry.add('a')",
                "print(Registry.items)",
                "Registry.label = 'set in the cell'",
                "reg = Registry()",
            ),
            ("Registry.items",),
            ("print(Registry.items, Registry.add(0))",),
        )
    ]


def mutable_defaults() -> list[Entity]:
    return [
        Entity(
            "mutable_defaults",
            code("""
                def acc(x, into=[]):
                    into.append(x)
                    return into
            """),
            ("acc(1)", "got = acc(2)", "print(acc.__defaults__)"),
            ("acc(3)",),
            ("print(acc(0))",),
        )
    ]


def decorated() -> list[Entity]:
    return [
        Entity(
            "wraps",
            code("""
                calls = []
                factor = 2

                def logged(fn):
                    @functools.wraps(fn)
                    def wrapper(*args, **kwargs):
                        calls.append(fn.__name__)
                        return fn(*args, **kwargs)
                    return wrapper

                @logged
                def double(x):
                    return factor * x
            """),
            (
                "y = double(21)",
                "print(double(2), double.__name__)",
                "print(double.__wrapped__(5))",
                "tripled = logged(lambda v: 3 * v)",
            ),
            ("double(4)",),
            ("print(double(1), calls)",),
        ),
        Entity(
            "contextmanager",
            code("""
                trail = []

                @contextlib.contextmanager
                def tagged(tag):
                    trail.append('enter ' + tag)
                    yield tag.upper()
                    trail.append('exit ' + tag)
            """),
            (
                "with tagged('a') as t:\n    print(t)",
                "with tagged('b'):\n    trail.append('inside')",
            ),
            ("trail",),
            ("with tagged('later') as t:\n    print(t, trail)",),
        ),
        Entity(
            "lru_cache",
            code("""
                @functools.lru_cache(maxsize=None)
                def fib(n):
                    return n if n < 2 else fib(n - 1) + fib(n - 2)
            """),
            # Its parameters, not its cache_info(): a task cell's calls fill the worker's
            # cache, not the notebook's (the README says so).
            ("f = fib(20)", "print(fib(10))", "print(fib.cache_parameters())"),
            ("fib(15)",),
            ("print(fib(5), fib.cache_parameters())",),
        ),
        Entity(
            "closure",
            code("""
                def make_counter():
                    n = 0
                    def bump():
                        nonlocal n
                        n += 1
                        return n
                    return bump

                counter = make_counter()
            """),
            ("counter()", "k = counter()", "print(counter())", "other = make_counter()"),
            ("counter()",),
            ("print(counter())",),
        ),
    ]


def travel_less() -> list[Entity]:
    return [
        Entity(
            "generators",
            code("""
                squares = (i * i for i in range(5))

                def count_up(k):
                    yield from range(k)
            """),
            (
                "first = next(squares)",
                "print(list(squares))",
                "vals = list(count_up(3))",
                "print(sum(count_up(4)))",
            ),
            ("sum(count_up(5))",),
            ("print(list(squares))",),
            frozenset({"squares"}),
        ),
        Entity(
            "files",
            code("""
                fh = open('notes.txt', 'w')
                fh.write('a')
                done = open('done.txt', 'w')
                done.close()
            """),
            (
                "print(fh.closed)",
                "fh.write('b')",
                "print(done.closed)",
                "print(open('done.txt').read() == '')",
            ),
            ("fh.closed",),
            ("print(fh.closed, done.closed)",),
            frozenset({"fh", "done"}),
        ),
    ]


VOCABULARY: dict[str, list[Entity]] = {}
for _make in (
    aliases,
    shared_keys,
    records,
    sequences,
    views,
    structured,
    frames,
    dataclasses_,
    enums,
    class_state,
    mutable_defaults,
    decorated,
    travel_less,
):
    for _entity in _make():
        VOCABULARY.setdefault(_entity.kind, []).append(_entity)

RAISE = "raise ValueError('after the changes')"


#: The generated tests: one per kind, whose cells work on that kind alone (up to two other
#: kinds stand by in the setup, untouched), and ``mixed``, whose cells work on all they set up.
FOCUSES = [*sorted(VOCABULARY), "mixed"]


@st.composite
def examples(draw: st.DrawFn, focus: str) -> Example:
    """A setup of one to three kinds (``focus`` first), and a cell of operations on ``focus``
    (or, for ``mixed``, on all of them); maybe raising, maybe ending in a value."""
    if focus == "mixed":
        kinds = draw(
            st.lists(st.sampled_from(sorted(VOCABULARY)), min_size=1, max_size=3, unique=True)
        )
    else:
        others = sorted(set(VOCABULARY) - {focus})
        kinds = [focus, *draw(st.lists(st.sampled_from(others), max_size=2, unique=True))]
    if focus == "mixed":
        entities = [draw(st.sampled_from(VOCABULARY[k])) for k in kinds]
        worked = entities
    else:  # the kinds standing by come in their smallest variant: they cost time, not cover
        entities = [
            draw(st.sampled_from(VOCABULARY[focus])),
            *(VOCABULARY[k][0] for k in kinds[1:]),
        ]
        worked = entities[:1]
    body = draw(
        st.lists(st.sampled_from([op for e in worked for op in e.ops]), min_size=1, max_size=4)
    )
    if draw(st.integers(0, 4)) == 4:
        body.append(RAISE)
    last = draw(st.none() | st.sampled_from([v for e in worked for v in e.values]))
    if last is not None and RAISE not in body:
        body.append(last)
    later = draw(st.lists(st.sampled_from([s for e in worked for s in e.later]), max_size=2))
    return Example(
        setup="\n\n".join(e.setup for e in entities),
        cell="\n".join(body),
        later="\n".join(later),
        travel_less=frozenset().union(*(e.travel_less for e in entities)),
    )
