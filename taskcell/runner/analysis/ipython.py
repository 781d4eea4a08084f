"""IPython's embedded language in a cell: magics, shell escapes and the Python they run.

A cell reaches the analysis transformed (``shell.transform_cell``), so IPython's syntax arrives
as calls: ``get_ipython().run_line_magic(...)``, ``run_cell_magic``, ``system``, ``getoutput``.
This module reads those calls into :class:`Shell` records of what each runs in the notebook's
namespace, for the scope visitor to analyse as the cell's own code:

- ``%time``/``%%time``, ``%prun`` and ``%%capture`` bodies read and bind, ``%timeit`` only reads;
  ``{expr}`` and ``$name`` in a shell command or a line magic's arguments are reads. A cell
  magic's body is transformed with the ``transform`` given (IPython's ``transform_cell``).
- A trailing ``;`` silences the cell's last expression (:func:`ends_with_semicolon`).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import string
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

_SHELL_METHODS = {"run_line_magic": "%", "run_cell_magic": "%%", "system": "!", "getoutput": "!!"}
#: Line magics whose argument is Python run in the namespace, with the options they take a value
#: for (``%timeit -n 10 -r 3 stmt``); ``%timeit`` binds nothing (it runs in a function).
_LINE_CODE = {"time": "", "timeit": "nrp", "prun": "lDTsq"}
#: Cell magics whose body is Python run in the namespace.
_CELL_CODE = frozenset({"time", "timeit", "prun", "capture"})
_DOLLAR_NAME = re.compile(r"(?<![$\\])\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Shell:
    """What one magic or shell escape runs in the notebook's namespace.

    Attributes
    ----------
    magic
        As written: ``"%time"``, ``"%%capture"``, ``"!"`` (``!cmd``), ``"!!"`` (``x = !cmd``).
    reads
        The expressions IPython expands into its command or line (``{expr}``, ``$name``).
    captured
        The name ``%%capture`` binds to the captured output.
    code
        The Python it runs here: a line magic's statement, a cell magic's body.
    binds
        Whether what ``code`` binds stays bound (not for ``%timeit``, run in a function).
    """

    magic: str
    reads: tuple[ast.expr, ...] = ()
    captured: str | None = None
    code: tuple[ast.stmt, ...] = ()
    binds: bool = True


def is_get_ipython(node: ast.AST) -> bool:
    """Whether ``node`` is the call ``get_ipython()``, by which Python reaches IPython's shell."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "get_ipython"
    )


def ipython_call(node: ast.AST) -> tuple[str, list[str]] | None:
    """``("run_line_magic", ["time", "x = f()"])`` for IPython's transformed syntax,
    ``get_ipython().run_line_magic("time", "x = f()")`` (also ``run_cell_magic``, ``system``,
    ``getoutput``): the method and its arguments, all string literals; None for any other call,
    such as one with computed arguments (``get_ipython()`` used as an object)."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _SHELL_METHODS
        and is_get_ipython(node.func.value)
    ):
        return None
    args = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(args) != len(node.args) or node.keywords:
        return None
    return node.func.attr, args


def shell(method: str, args: list[str], transform: Callable[[str], str] | None = None) -> Shell:
    """What the transformed call ``get_ipython().method(*args)`` (:func:`ipython_call`) runs in
    the notebook's namespace; ``transform`` turns a cell magic's body into Python."""
    kind = _SHELL_METHODS[method]
    if kind in ("!", "!!"):
        return Shell(kind, reads=_expanded(args[0]))
    name, line, body = args[0], args[1] if len(args) > 1 else "", args[2:]
    magic = kind + name
    if not body:  # a line magic
        if name in _LINE_CODE:
            statement = _python(_statement(line, _LINE_CODE[name]))
            return Shell(magic, code=statement, binds=name != "timeit")
        return Shell(magic, reads=_expanded(line))
    captured = _capture_target(line) if name == "capture" else None
    reads = _expanded(line) if name not in ("capture", "timeit") else ()
    code: tuple[ast.stmt, ...] = ()
    if name in _CELL_CODE:
        source = body[0] if transform is None else transform(body[0])
        if name == "timeit":  # the line is setup code, run in one function with the body
            source = _statement(line, _LINE_CODE["timeit"]) + "\n" + source
        code = _python(source)
    return Shell(magic, reads=reads, captured=captured, code=code, binds=name != "timeit")


def _python(code: str) -> tuple[ast.stmt, ...]:
    """The statements of Python a magic runs; none if it does not parse (IPython will say so
    when the cell runs)."""
    try:
        return tuple(ast.parse(code).body)
    except (SyntaxError, ValueError):
        return ()


def _expanded(text: str) -> tuple[ast.expr, ...]:
    """The names IPython expands into a command or magic line: ``{expr}`` and ``$name``."""
    try:
        expressions = [f for _, f, _, _ in string.Formatter().parse(text) if f]
    except ValueError:
        expressions = []
    reads: list[ast.expr] = []
    for expression in expressions:
        with contextlib.suppress(SyntaxError, ValueError):
            reads.append(ast.parse(expression, mode="eval").body)
    reads += [ast.Name(id=name, ctx=ast.Load()) for name in _DOLLAR_NAME.findall(text)]
    return tuple(reads)


def _capture_target(line: str) -> str | None:
    """The name ``%%capture [options] name`` binds."""
    words = [w for w in line.split() if not w.startswith("-")]
    return words[-1] if words and words[-1].isidentifier() else None


def _statement(line: str, valued_options: str) -> str:
    """A magic line without its leading options: ``-n 10 -r 3 f(x)`` -> ``f(x)``."""
    words = line.split(" ")
    while words and words[0].startswith("-") and len(words[0]) > 1:
        option = words.pop(0)
        if option[-1] in valued_options and len(option) == 2 and words:
            words.pop(0)
        while words and not words[0]:
            words.pop(0)
    return " ".join(words)


def ends_with_semicolon(source: str) -> bool:
    """IPython's rule: the cell's last token, comments and newlines aside, is ``;``."""
    if ";" not in source:
        return False  # without tokenizing: most cells
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    skip = {tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.DEDENT}
    for token in reversed(tokens):
        if token.type not in skip:
            return token.type == tokenize.OP and token.string == ";"
    return False


def followed_by_semicolon(lines: list[str], stmt: ast.stmt) -> bool:
    """Whether ``;`` follows the statement on its last line."""
    line = lines[(stmt.end_lineno or stmt.lineno) - 1].encode()  # offsets count UTF-8 bytes
    return line[stmt.end_col_offset or 0 :].lstrip().startswith(b";")
