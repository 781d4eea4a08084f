"""Types read from a notebook's code, for Latch's typed interfaces: certain, or ANY."""

from __future__ import annotations

import ast

import pytest

from taskcell.export.value_types import ANY, Type, cell_types, infer, literal_type

PATHS = frozenset({"Path", "pathlib.Path"})
INT, FLOAT, STR, BOOL = Type("int"), Type("float"), Type("str"), Type("bool")


def listof(t: Type) -> Type:
    return Type("list", (t,))


def dictof(t: Type) -> Type:
    return Type("dict", (t,))


NUMBER = Type("union", (INT, FLOAT))
ENV = {"n": INT, "x": FLOAT, "s": STR, "xs": listof(INT), "d": dictof(FLOAT), "f": Type("file")}

EXPRESSIONS = [
    ("3", INT),
    ("2.5", FLOAT),
    ("'a'", STR),
    ("True", BOOL),
    ("None", ANY),
    ("f'{n}'", STR),
    ("[1, 2]", listof(INT)),
    ("[1, 2.5]", listof(NUMBER)),
    ("[1, 'a', 2.5]", listof(Type("union", (INT, FLOAT, STR)))),
    ("[True, 1]", ANY),  # True is an int too: a union could not tell them apart
    ("[]", ANY),
    ("{'a': 1}", dictof(INT)),
    ("{1: 'a'}", ANY),  # Flyte's dict keys are strings
    ("(1, 2)", ANY),
    ("{1, 2}", ANY),
    ("-n", INT),
    ("n + 1", INT),
    ("n / 2", FLOAT),
    ("n // 2", INT),
    ("n ** 2", INT),
    ("n ** -1", ANY),
    ("n * x", FLOAT),
    ("s + 'b'", STR),
    ("s * n", STR),
    ("n > 1", BOOL),
    ("len(xs)", INT),
    ("round(x)", INT),
    ("round(x, 2)", FLOAT),
    ("round(unknown, 2)", ANY),
    ("sum(xs)", INT),
    ("max(xs)", INT),
    ("min(n, x)", ANY),
    ("sorted(xs)", listof(INT)),
    ("[v * x for v in xs]", listof(FLOAT)),
    ("{str(v): v for v in xs}", dictof(INT)),
    ("xs[0]", INT),
    ("xs[1:]", listof(INT)),
    ("d['a']", FLOAT),
    ("s.upper()", STR),
    ("s.split(',')", listof(STR)),
    ("f.read_text()", STR),
    ("Path('reads.fq')", Type("file")),
    ("Path('results/')", Type("dir")),
    ("pathlib.Path('data')", Type("dir")),
    ("helper(n)", ANY),
    ("np.arange(n)", ANY),
    ("n if s else x", NUMBER),
]


@pytest.mark.parametrize(("text", "expected"), EXPRESSIONS, ids=[t for t, _ in EXPRESSIONS])
def test_infer(text, expected):
    assert infer(ast.parse(text, mode="eval").body, ENV, PATHS) == expected


LITERALS = [
    ("25", INT),
    ("-3.5", FLOAT),
    ("[1, 2]", listof(INT)),
    ("{'a': [1]}", dictof(listof(INT))),
    ("Path('x.csv')", Type("file")),
    ("[Path('a.fq'), Path('b.fq')]", listof(Type("file"))),
    ("{'a': Path('d')}", dictof(Type("dir"))),
    ("[[Path('x.csv')]]", None),  # a task turns paths back at most one list deep
    ("[1, 2.5]", None),  # a union: not a parameter Latch's console shows well
    ("(1, 2)", None),
    ("None", None),
    ("len('abc')", None),
    ("x", None),
]


@pytest.mark.parametrize(("text", "expected"), LITERALS, ids=[t for t, _ in LITERALS])
def test_literal_type(text, expected):
    assert literal_type(ast.parse(text, mode="eval").body, PATHS) == expected


def test_cell_types_follow_the_top_level_assignments():
    code = (
        "a = 1\nb, c = 'x', [a]\na = a / 2\nn += 1\nfor i in xs:\n    total = i\n"
        "import math\ndef f():\n    pass\nwith open('f') as h:\n    text = h.read()\nk: int = 3"
    )
    assert cell_types(ast.parse(code), {"n": INT, "xs": listof(INT)}, PATHS) == {
        "a": FLOAT,
        "b": STR,
        "c": listof(INT),
        "n": INT,
        "i": ANY,
        "total": ANY,
        "math": ANY,
        "f": ANY,
        "h": ANY,
        "text": ANY,
        "k": INT,
    }
