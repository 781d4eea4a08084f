"""IPython syntax as the Python an exported module runs, or a refusal naming the magic.

IPython's own transformer turns a cell into Python first (``%time x = f()`` becomes
``get_ipython().run_line_magic('time', 'x = f()')``); each such statement is then translated
here. What a magic does in a notebook decides what it becomes:

- **Python it runs**: ``%time``/``%%time`` and ``%prun``/``%%prun`` keep their statement (the
  timing or profile is not printed); ``%timeit``/``%%timeit`` run it as IPython does
  (:func:`~taskcell.export.standalone.time_it`); ``%%capture`` becomes a ``with`` block.
- **Python with a plain meaning**: ``!cmd`` and ``x = !cmd`` (``%sx``, ``%system``) run the
  shell with IPython's ``{expr}``/``$name`` expansion; ``%%bash``, ``%%sh``, ``%%script``;
  ``%%writefile``; ``%env``, ``%set_env``, ``%cd``, ``%pwd`` through ``os``; ``%%html``,
  ``%%markdown``, ``%%latex``, ``%%svg``, ``%%javascript`` as IPython displays.
- **The notebook's own set-up**, which has no meaning in a module: ``%load_ext``,
  ``%matplotlib``, ``%config``, ``%autoreload``, help (``obj?``) and the like, and taskcell's
  own magics: left as a comment.
- **Installing packages** (``%pip``, ``%conda``, ``!pip install``): left as a comment, with a
  warning that the module's environment must have them.
- **IPython's aliases**, as IPython runs them: a magic's alias as its magic (``%%file`` is
  ``%%writefile``), a shell alias as its command (``%ls -l`` runs ``ls -F --color -l``), and a
  one-line cell that is a magic's name without its ``%`` (``ls``, ``pwd``, ``cd /tmp``) as that
  magic, where no earlier cell binds the name (IPython's automagic). Help lookups (``x?``,
  ``%%task?``) are left as comments.
- **Anything else** (``%run``, ``%store``, ``%%sql``, an extension's magic): refused, naming the
  cell and the magic.

The Python refers to helpers under names chosen not to clash with the notebook's
(:class:`Helpers`); the targets define or import each helper a module uses.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
import shlex
import textwrap
import types
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from taskcell.export.codegen import Namer, indent

__all__ = [
    "Helpers",
    "Refused",
    "Translation",
    "automagic",
    "cell_magic",
    "line_magic",
    "shell_escape",
]

#: Line magics that set up the notebook and mean nothing to a module: left as comments.
SET_UP = frozenset(
    {
        "load_ext",
        "reload_ext",
        "unload_ext",
        "matplotlib",
        "config",
        "autoreload",
        "aimport",
        "xmode",
        "pdb",
        "autosave",
        "colors",
        "debug",
        "pinfo",
        "pinfo2",
        "pdoc",
        "pdef",
        "psource",
        "pfile",
        "psearch",
        "lsmagic",
        "magic",
    }
)
#: taskcell's own magics: the notebook's plumbing, left out without a trace.
TASKCELL_OWN = frozenset({"task_cluster", "tasks", "task_panel", "task_cancel"})
#: Package managers: the module's environment must have what they install.
INSTALLERS = frozenset({"pip", "conda", "mamba", "micromamba", "uv"})
#: Cell magics whose body is the cell's own Python, run in the notebook's namespace.
PYTHON_BODIES = frozenset({"time", "prun", "capture"})
#: Cell magics that run their text with a program.
PROGRAMS = {"bash": "bash", "sh": "sh", "perl": "perl", "ruby": "ruby", "python3": "python3"}
#: Cell magics that display their text, and IPython's class for it.
DISPLAYS = {
    "html": "HTML",
    "HTML": "HTML",
    "markdown": "Markdown",
    "latex": "Latex",
    "svg": "SVG",
    "javascript": "Javascript",
    "js": "Javascript",
}
#: Where each helper comes from: taskcell's standalone functions, taskcell's changes in place, or
#: a module's name.
HELPER_SOURCES = {
    "show": "standalone",
    "shell": "standalone",
    "script": "standalone",
    "write_file": "standalone",
    "time_it": "standalone",
    "capture": "standalone",
    "ipython": "standalone",
    "update": "inplace",  # taskcell.runner.inplace's own source (carriers.inplace_source)
    "os": "import os",
    "display": "from IPython.display import display",
    **{cls: f"from IPython.display import {cls}" for cls in set(DISPLAYS.values())},
}
#: taskcell's line magics, which a notebook that loads taskcell has besides IPython's.
TASKCELL_LINE = TASKCELL_OWN | {"task_env"}
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_MAGIC_NAME = re.compile(r"%%?\w+")


class Refused(Exception):
    """A piece of IPython syntax a module cannot run; the message says why."""


class Helpers:
    """The module names of the helpers translated code calls, chosen once per notebook: private
    (``_show``), so that no notebook name, star imports included, is one of them."""

    def __init__(self, sources: Iterable[str]) -> None:
        words = {
            word for text in sources for word in _IDENTIFIER.findall(_MAGIC_NAME.sub(" ", text))
        }
        self.namer = Namer(words)
        self.names: dict[str, str] = {}

    def __call__(self, role: str) -> str:
        """The name of the helper ``role`` (a key of :data:`HELPER_SOURCES`)."""
        if role not in self.names:
            self.names[role] = self.namer.private(role)
        return self.names[role]

    @property
    def taken(self) -> set[str]:
        """Every name the notebook's cells may use, and those handed out since."""
        return self.namer.taken


@dataclass(frozen=True)
class Translation:
    """Python standing for one piece of IPython syntax."""

    code: str
    roles: tuple[str, ...] = ()
    """The helpers the code calls."""
    note: str | None = None
    """A sentence for the warning, when something was left out."""


def _comment(typed: str, note: str | None = None) -> Translation:
    lines = typed.splitlines() or [""]
    return Translation("\n".join(f"# {line}".rstrip() for line in lines), (), note)


def _call(helpers: Helpers, role: str, *arguments: str) -> tuple[str, tuple[str, ...]]:
    return f"{helpers(role)}({', '.join(arguments)})", (role,)


def _options(text: str, valued: str) -> tuple[dict[str, str], str]:
    """``-n 3 -r2 -q stmt`` -> ``({"n": "3", "r": "2", "q": ""}, "stmt")``, as IPython's
    ``parse_options`` reads a line."""
    found: dict[str, str] = {}
    rest = text.strip()
    while rest.startswith("-") and len(rest) > 1 and not rest[1].isspace():
        word, _, after = rest.partition(" ")
        if word.startswith("--"):  # a long flag: --no-stdout
            found[word[1:]] = ""
            rest = after.strip()
            continue
        letter, value = word[1], word[2:]
        if letter in valued and not value:
            value, _, after = after.strip().partition(" ")
        found[letter] = value
        rest = after.strip()
    return found, rest


def _number(options: dict[str, str], letter: str, typed: str) -> str | None:
    value = options.get(letter)
    if value is None:
        return None
    if not value.isdigit():
        raise Refused(f"{typed!r}: -{letter} takes a whole number, got {value!r}")
    return value


@functools.cache
def magic_aliases() -> dict[tuple[str, str], str]:
    """IPython's aliases of its own magics, ``(kind, alias) -> magic`` (``("cell", "file") ->
    "writefile"``), as its shell registers them: read from the shell's source, since building a
    shell takes over this process's ``__main__`` and builtins."""
    from IPython.core.interactiveshell import InteractiveShell

    tree = ast.parse(textwrap.dedent(inspect.getsource(InteractiveShell.init_magics)))
    found: dict[tuple[str, str], str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "register_alias":
            words = [
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            if len(words) == len(node.args) >= 2:
                found[words[2] if len(words) > 2 else "line", words[0]] = words[1]
    return found


@functools.cache
def shell_aliases() -> dict[str, str]:
    """IPython's shell aliases, name -> command (``ls`` -> ``ls -F --color``): what its
    ``alias_manager.aliases`` holds by default on this platform."""
    from IPython.core.alias import default_aliases

    return dict(default_aliases())


@functools.cache
def _line_magics() -> frozenset[str]:
    """The line magics a notebook has without writing ``%``: IPython's own, their aliases, its
    shell aliases and taskcell's."""
    from IPython.core import magics as ipython_magics

    own = {
        name
        for cls in map(functools.partial(getattr, ipython_magics), dir(ipython_magics))
        if isinstance(cls, type) and "line" in getattr(cls, "magics", {})
        for name in cls.magics["line"]  # type: ignore[attr-defined]
    }
    aliases = {alias for kind, alias in magic_aliases() if kind == "line"}
    return frozenset(own | aliases | set(shell_aliases()) | TASKCELL_LINE)


def automagic(body: str, bound: Collection[str]) -> str | None:
    """``get_ipython().run_line_magic(...)`` for a cell IPython runs as a magic typed without
    its ``%`` (``ls -l``, ``pwd``); None for any other.

    IPython's automagic: only a one-line cell, whose first word is a line magic that no name
    of the notebook (``bound``), builtin or keyword shadows, and that is not assigned to.
    """
    from IPython.core.prefilter import is_shadowed
    from IPython.core.splitinput import LineInfo

    if len(body.strip("\n").splitlines()) != 1:
        return None
    info = LineInfo(body.strip("\n"))
    namespace = types.SimpleNamespace(
        user_ns=bound, user_global_ns={}, ns_table={"builtin": vars(builtins)}
    )
    if (
        info.esc
        or info.ifun not in _line_magics()
        or info.the_rest[:1] in ("=", ",")
        or is_shadowed(info.ifun.split(".", 1)[0], namespace)
    ):
        return None
    name, _, line = f"{info.ifun} {info.the_rest}".partition(" ")
    return f"{info.pre}get_ipython().run_line_magic({name!r}, {line!r})\n"


def shell_alias(name: str, line: str) -> str:
    """The command IPython's shell alias ``name`` runs for ``%name line``, expanded by IPython's
    own :class:`~IPython.core.alias.Alias`."""
    from IPython.core.alias import Alias

    commands: list[str] = []
    recorder = types.SimpleNamespace(
        magics_manager=types.SimpleNamespace(magics={"line": {}}), system=commands.append
    )
    Alias(recorder, name, shell_aliases()[name])(line)
    return commands[0].strip()


def line_magic(name: str, line: str, target: str | None, helpers: Helpers) -> Translation:
    """The Python for ``%name line`` (``target = %name line`` where ``target`` is given).

    Raises
    ------
    Refused
        For a magic a module cannot run.
    """
    typed = f"%{name} {line}".rstrip()
    if target is not None:
        typed = f"{target} = {typed}"
    bind = f"{target} = " if target is not None else ""
    name = magic_aliases().get(("line", name), name)
    if name in shell_aliases():
        if target is not None:
            raise Refused(f"{typed!r} binds None, as IPython runs it; use {target} = !{name} ...")
        try:
            command = shell_alias(name, line)
        except Exception as e:  # IPython's UsageError: too few arguments
            raise Refused(f"{typed!r}: {e}") from None
        code, roles = _call(helpers, "shell", repr(command))
        return Translation(code, roles)
    if name in SET_UP:
        return _comment(typed)
    if name in INSTALLERS:
        return _comment(typed, f"{typed!r} left as a comment: install that where the module runs")
    if name in ("time", "prun"):
        options, statement = _options(line, "DTsTl") if name == "prun" else ({}, line)
        if options:
            raise Refused(f"{typed!r}: the module runs the statement but not its options")
        return Translation(bind + statement.strip() if statement.strip() else "pass")
    if name == "timeit":
        options, statement = _options(line, "nrp")
        if "o" in options or target is not None:
            raise Refused(f"{typed!r}: the module has no timing result to give")
        number, repeat = _number(options, "n", typed), _number(options, "r", typed)
        arguments = [repr(statement)]
        arguments += [f"number={number}"] if number else []
        arguments += [f"repeat={repeat}"] if repeat else []
        code, roles = _call(helpers, "time_it", *arguments)
        return Translation(code, roles)
    if name in ("sx", "system"):
        code, roles = _call(helpers, "shell", repr(line), "lines=True")
        return Translation(bind + code, roles)
    if name in ("env", "set_env"):
        return _environment(name, line, bind, typed, helpers)
    if name == "cd" and line.strip() and not line.strip().startswith("-"):
        os = helpers("os")
        path = shlex.split(line)[0] if line.strip() else "~"
        code = f"{os}.chdir({os}.path.expanduser({path!r}))\nprint({os}.getcwd())"
        return Translation(code, ("os",))
    if name == "pwd" and not line.strip():
        return Translation(f"{bind}{helpers('os')}.getcwd()", ("os",))
    raise Refused(f"{typed!r}: %{name} has no meaning outside IPython that taskcell can write")


def _environment(name: str, line: str, bind: str, typed: str, helpers: Helpers) -> Translation:
    """``%env``, ``%env NAME``, ``%env NAME=VALUE``, ``%env NAME VALUE``, ``%set_env ...``."""
    os = helpers("os")
    text = line.strip()
    if not text:
        if name == "set_env":
            raise Refused(f"{typed!r}: %set_env needs a name and a value")
        return Translation(f"{bind}dict({os}.environ)", ("os",))
    key, sep, value = text.partition("=")
    if not sep:
        key, _, value = text.partition(" ")
        sep = " " if value else ""
    key, value = key.strip(), value.strip()
    if not sep:
        if name == "set_env":
            raise Refused(f"{typed!r}: %set_env needs a name and a value")
        return Translation(f"{bind}{os}.environ[{key!r}]", ("os",))
    code = f"{os}.environ[{key!r}] = {value!r}"
    if name == "env":
        code += f"\nprint({f'env: {key}={value}'!r})"
    return Translation(code, ("os",))


def shell_escape(command: str, target: str | None, helpers: Helpers) -> Translation:
    """The Python for ``!command`` (``target = !command`` where ``target`` is given)."""
    typed = f"{target} = !{command}" if target is not None else f"!{command}"
    words = command.split()
    program = words[0].rpartition("/")[2] if words else ""
    if program in ("pip", "pip3", "conda", "mamba", "apt", "apt-get") or words[1:3] == [
        "-m",
        "pip",
    ]:
        return _comment(typed, f"{typed!r} left as a comment: install that where the module runs")
    if target is not None:
        code, roles = _call(helpers, "shell", repr(command), "lines=True")
        return Translation(f"{target} = {code}", roles)
    code, roles = _call(helpers, "shell", repr(command))
    return Translation(code, roles)


def cell_magic(name: str, line: str, body: str, helpers: Helpers) -> Translation:
    """The Python for a cell magic whose body is text (``%%bash``, ``%%writefile``...), or the
    wrapper around a Python body (``%%capture``: the body goes where ``{body}`` is).

    Raises
    ------
    Refused
        For a cell magic a module cannot run.
    """
    typed = f"%%{name} {line}".rstrip()
    name = magic_aliases().get(("cell", name), name)
    if name in ("time", "prun"):
        return Translation("{body}")
    if name == "timeit":
        options, setup = _options(line, "nrp")
        arguments = [repr(body)]
        arguments += [f"setup={setup!r}"] if setup.strip() else []
        for letter, keyword in (("n", "number"), ("r", "repeat")):
            if (value := _number(options, letter, typed)) is not None:
                arguments.append(f"{keyword}={value}")
        code, roles = _call(helpers, "time_it", *arguments)
        return Translation(code, roles)
    if name == "capture":
        given = {word for word in line.split() if word.startswith("-")}
        words = [word for word in line.split() if not word.startswith("-")]
        if len(words) > 1 or given - {"--no-stdout", "--no-stderr", "--no-display"}:
            raise Refused(f"{typed!r}: options other than --no-stdout/--no-stderr/--no-display")
        flags = [
            f"{what}=False" for what in ("stdout", "stderr", "display") if f"--no-{what}" in given
        ]
        code, roles = _call(helpers, "capture", *flags)
        target = f" as {words[0]}" if words else ""
        return Translation(f"with {code}{target}:\n{{body}}", roles)
    if name == "writefile":
        options, path = _options(line, "")
        if set(options) - {"a", "-append"} or not path.strip():
            raise Refused(f"{typed!r}: %%writefile takes a path and -a")
        arguments = [repr(shlex.split(path)[0]), repr(body)]
        if options:
            arguments.append("append=True")
        code, roles = _call(helpers, "write_file", *arguments)
        return Translation(code, roles)
    program = PROGRAMS.get(name) or (line.strip() if name == "script" else None)
    if program is not None:
        if (name != "script" and line.strip()) or program.startswith("-"):
            raise Refused(f"{typed!r}: the module runs the script but not these options")
        code, roles = _call(helpers, "script", repr(program), repr(body))
        return Translation(code, roles)
    if name in DISPLAYS:
        cls = DISPLAYS[name]
        return Translation(f"{helpers('display')}({helpers(cls)}({body!r}))", ("display", cls))
    raise Refused(f"{typed!r}: %%{name} has no meaning outside IPython that taskcell can write")


def wrap(wrapper: str, body: str) -> str:
    """``wrapper`` (a :func:`cell_magic` translation holding ``{body}``) around ``body``."""
    if "{body}" not in wrapper:
        return wrapper + "\n"
    head, _, tail = wrapper.partition("{body}")
    inner = body.strip("\n") or "pass"
    if head.endswith(":\n"):
        inner = indent(inner)
    return head + inner + tail + "\n"
