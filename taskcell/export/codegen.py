"""Small pieces every target uses to write Python source that reads as if typed by a person."""

from __future__ import annotations

import ast
import importlib.util
import io
import keyword
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from collections.abc import Iterable

from taskcell.errors import ExportError

__all__ = [
    "CellsCode",
    "Namer",
    "comment",
    "docstring",
    "format_source",
    "indent",
    "module_source",
    "parses",
    "string_rows",
]


class Namer:
    """Hands out module-level names that clash with no notebook name, keyword or builtin."""

    def __init__(self, taken: Iterable[str]) -> None:
        import builtins

        self.taken = set(taken) | set(dir(builtins)) | set(keyword.kwlist)

    def fresh(self, preferred: str, alternative: str | None = None) -> str:
        """``preferred`` as an identifier, else ``alternative``, else that with ``_2``, ``_3``..."""

        def clean(text: str) -> str:
            name = re.sub(r"\W+", "_", text).strip("_") or "task"
            return f"task_{name}" if name[0].isdigit() else name

        first = clean(preferred)
        second = clean(alternative) if alternative else first
        if first not in self.taken:
            self.taken.add(first)
            return first
        if second not in self.taken:
            self.taken.add(second)
            return second
        i = 2
        while f"{second}_{i}" in self.taken:
            i += 1
        self.taken.add(f"{second}_{i}")
        return f"{second}_{i}"

    def private(self, preferred: str) -> str:
        """``_preferred`` (else with ``_2``, ``_3``...): a name for the module's own machinery,
        which no star import binds and so no notebook code can rebind."""
        name = chosen = "_" + re.sub(r"\W+", "_", preferred).strip("_")
        i = 2
        while chosen in self.taken:
            chosen, i = f"{name}_{i}", i + 1
        self.taken.add(chosen)
        return chosen


class CellsCode(str):
    """A part holding the notebook's own code (a task, the driver), parsed when its cells were
    read: not parsed again (see :func:`module_source`); what taskcell wrote around it was."""


def parses(code: str) -> str:
    """``code``, checked to parse: a failure is a bug in taskcell, not in the notebook.

    Raises
    ------
    ExportError
        Naming the line, and asking for a report.
    """
    try:
        ast.parse(code)
    except SyntaxError as e:
        raise ExportError(
            f"taskcell generated a module that does not parse ({e.msg}: {e.text!r}); "
            f"please report this with the notebook"
        ) from e
    return code


def module_source(parts: Iterable[str]) -> str:
    """A module from its top-level parts, each checked to parse but a :class:`CellsCode`.

    Parsed part by part, never whole: a whole module's syntax tree takes memory in proportion
    to the notebook, many times over, and time; the parts taskcell writes itself are checked.
    """
    kept = [part if isinstance(part, CellsCode) else parses(part) for part in parts if part.strip()]
    return "\n\n\n".join(part.strip("\n") for part in kept) + "\n"


def string_rows(code: str) -> set[int]:
    """Line numbers (1-based) that lie inside a multi-line string, after its first line.

    Indenting those lines would change the string's value, so :func:`indent` leaves them.
    """
    rows: set[int] = set()
    if '"""' not in code and "'''" not in code and "\\\n" not in code:
        return rows  # no string can span lines
    starts: list[int] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            name = tokenize.tok_name[token.type]
            if name == "STRING" and token.end[0] > token.start[0]:
                rows.update(range(token.start[0] + 1, token.end[0] + 1))
            elif name == "FSTRING_START":  # Python 3.12+: f-strings come in pieces
                starts.append(token.start[0])
            elif name == "FSTRING_END" and starts:
                first = starts.pop()
                rows.update(range(first + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - code was parsed before
        pass
    return rows


def indent(code: str, prefix: str = "    ") -> str:
    """Indent ``code`` by ``prefix``, leaving blank lines and multi-line string contents alone."""
    inside = string_rows(code)
    lines = code.rstrip("\n").splitlines()
    return "\n".join(
        line if (i in inside or not line.strip()) else prefix + line
        for i, line in enumerate(lines, 1)
    )


def comment(text: str, prefix: str = "", width: int = 84) -> str:
    """``text`` (markdown) as ``#`` comment lines, long prose lines wrapped to ``width``.

    Lines in fenced code blocks, indented lines, tables and list items keep their shape.
    """
    lines: list[str] = []
    fenced = False
    for line in text.strip().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        keep = fenced or line.startswith((" ", "\t", "|", "```")) or len(line) <= width
        lines += [line] if keep else textwrap.wrap(line, width, break_on_hyphens=False)
    return "\n".join(f"{prefix}# {line}".rstrip() for line in lines)


def docstring(text: str) -> str:
    """A module docstring holding ``text`` (a notebook's first markdown cell) as written."""
    text = textwrap.dedent(text).strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return f'"""{text}\n"""' if "\n" in text else f'"""{text}"""'


def _ruff() -> list[str] | None:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else None


def format_source(source: str) -> str:
    """``source`` with sorted imports and formatted by ``ruff``, when ruff is installed.

    ruff runs with its defaults (``--isolated``), so the module looks the same wherever it is
    exported. A failure to format is not an error: the source is returned as it was.
    """
    command = _ruff()
    if command is None:
        return source
    for step in (["check", "--select", "I", "--fix-only", "--exit-zero"], ["format"]):
        try:
            done = subprocess.run(
                [*command, *step, "--isolated", "-"],
                input=source,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return source
        if done.returncode != 0 or not done.stdout:
            return source
        source = done.stdout
    return source
