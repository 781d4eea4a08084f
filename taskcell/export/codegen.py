"""Small pieces every target uses to write Python source that reads as if typed by a person."""

from __future__ import annotations

import importlib.util
import io
import shutil
import subprocess
import sys
import textwrap
import tokenize

__all__ = ["comment", "docstring", "format_source", "indent", "string_rows"]


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
