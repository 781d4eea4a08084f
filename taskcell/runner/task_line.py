"""The ``%%task`` line: its grammar, and the request it stands for.

One parser serves the magic (whose ``%%task?`` help is this parser's help) and the exporter,
which reads the same lines out of saved notebooks.

Every option is given at most once: ``--cpu 2 --cpu 3`` is refused, not read as 3. An option's
value may start with ``-`` (``--memory -1Gi`` reads as ``--memory=-1Gi``), so that it is refused
by the spec with the same message as ``Resources(memory="-1Gi")``, not by argparse as a missing
value.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from taskcell.errors import SpecError
from taskcell.spec import (
    MAX_RETRIES,
    RANGED_FIELDS,
    REQUEST_FIELDS,
    Environment,
    Expression,
    Resources,
    ResourceTemplate,
    get_preset,
    parse_retries,
)
from taskcell.spec.resources import parse_resource_pairs


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so a bad line changes nothing."""

    def error(self, message: str) -> NoReturn:
        words = message.removeprefix("unrecognized arguments: ").split()
        options = [o for a in self._actions for o in a.option_strings]
        near = [m for w in words for m in difflib.get_close_matches(w, options, n=1)]
        hint = f' (did you mean "{near[0]}"?)' if near and message != " ".join(words) else ""
        raise SpecError(f"%%task: {message}{hint}\n{self.format_usage().strip()}")


class _Once(argparse.Action):
    """Store an option's value, refusing a second one: two values are a contradiction."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values == []:  # argparse before Python 3.12 drops a value "--" (python/cpython#106049)
            values = "--"
        given = namespace.__dict__.setdefault("_given", {})
        if self.dest in given:
            raise SpecError(
                f"%%task: {option_string} is given twice, {given[self.dest]!r} and {values!r}; "
                f"give it once"
            )
        given[self.dest] = values
        setattr(namespace, self.dest, values)


def _parser() -> _Parser:
    p = _Parser(
        prog="%%task",
        description=(
            "Run this cell as a task on a Dask cluster, on a worker that meets the request. "
            "The names the cell reads are shipped to it; the names it binds come back when "
            "it succeeds. Values may be expressions of the notebook's names, evaluated when "
            'the cell runs (--cpu "min(8, len(files))").'
        ),
        add_help=False,
        allow_abbrev=False,
    )
    p.add_argument("preset", nargs="?", help="a preset, e.g. small_task, small_gpu_task")
    p.add_argument(
        "--preset", dest="preset_option", metavar="NAME", help="same as PRESET", action=_Once
    )
    p.add_argument(
        "--cpu", help='cores: 2, 0.5, "500m", or a request,limit pair "1,4"', action=_Once
    )
    p.add_argument(
        "--memory", help='bytes: 4Gi, 512Mi, 500M, 100e9, "64 GiB", or "1Gi,4Gi"', action=_Once
    )
    p.add_argument(
        "--gpu", help='a count (1), a type (A100:2, "A100 80G:1", L40s), A100/1g.5gb', action=_Once
    )
    p.add_argument("--disk", help="scratch disk: 50Gi", action=_Once)
    p.add_argument("--shm", help="shared memory (/dev/shm): 8Gi or auto", action=_Once)
    p.add_argument(
        "--resources",
        metavar="K=V[,K=V]",
        help="any other Dask abstract resource, as `dask worker --resources` takes it",
        action=_Once,
    )
    p.add_argument(
        "--env", metavar="NAME", help="a named environment defined with %%task_env", action=_Once
    )
    p.add_argument(
        "--name", help="the task's name in %%tasks (default: cell-N, N its count)", action=_Once
    )
    p.add_argument("--bg", action="store_true", help="return at once with a handle")
    p.add_argument(
        "--graph",
        action="store_true",
        help="run the cell here; every task its Dask graphs submit carries the request",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="with auto: measure the cell's memory on small samples of its inputs first",
    )
    p.add_argument(
        "--retries",
        default="0",
        metavar="N",
        help=f"reruns if a worker dies, 0 to {MAX_RETRIES}",
        action=_Once,
    )
    return p


PARSER = _parser()

# Options that take a value: the word after one is its value, even when it starts with "-".
_VALUED = frozenset(o for a in PARSER._actions if a.nargs != 0 for o in a.option_strings)
_OPTIONS = frozenset(o for a in PARSER._actions for o in a.option_strings)


@dataclass(frozen=True, kw_only=True)
class TaskLine:
    """A parsed ``%%task`` line, values still as typed."""

    preset: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, int | float] = field(default_factory=dict)
    env: str | None = None
    name: str | None = None
    background: bool = False
    graph: bool = False
    retries: int = 0
    probe: bool = False


def parse_task_line(line: str) -> TaskLine:
    """Parse the text after ``%%task``; :class:`SpecError` names the bad option."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise SpecError(f"%%task: cannot split the line {line!r}: {e}") from None
    ns = PARSER.parse_args(_values_joined(words))
    if ns.graph and ns.bg:
        raise SpecError("%%task: --graph runs the cell in this kernel, so it cannot be --bg")
    if ns.preset and ns.preset_option and ns.preset != ns.preset_option:
        raise SpecError(f"%%task: two presets given, {ns.preset!r} and {ns.preset_option!r}")
    preset = ns.preset or ns.preset_option
    if ns.probe and preset != "auto":
        given = f"asks for the preset {preset!r}" if preset else "names no preset"
        raise SpecError(
            f"%%task: --probe measures a cell for auto to size it, and this line {given}; "
            f"write %%task auto --probe (or %%task --preset auto --probe)"
        )
    if ns.probe and ns.graph:
        raise SpecError(
            "%%task: --graph runs the cell in this kernel, so --probe has no task to size"
        )
    return TaskLine(
        preset=preset,
        fields={f: getattr(ns, f) for f in REQUEST_FIELDS if getattr(ns, f) is not None},
        extra=parse_extra(ns.resources) if ns.resources else {},
        env=ns.env,
        name=ns.name,
        background=ns.bg,
        graph=ns.graph,
        retries=parse_retries(ns.retries, "%%task: --retries"),
        probe=ns.probe,
    )


def _values_joined(words: Sequence[str]) -> list[str]:
    """``["--memory", "-1Gi"]`` -> ``["--memory=-1Gi"]``: argparse takes a word that starts with
    "-" for an option, and would say only "expected one argument"; here it is the value."""
    out: list[str] = []
    for word in words:
        option = word.partition("=")[0]
        if out and out[-1] in _VALUED and word.startswith("-") and option not in _OPTIONS:
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def parse_extra(text: str) -> dict[str, int | float]:
    """``--resources "process=1,FPGA=2"``, read by the grammar ``taskcell worker`` reads too."""
    try:
        return parse_resource_pairs(text)
    except SpecError as error:
        raise SpecError(f"--resources: {error}") from None


@dataclass(frozen=True)
class LineFields:
    """A line's own fields, each read once: the valid values, and the expressions (field ->
    text) that are evaluated when the cell runs."""

    fixed: Resources
    dynamic: Mapping[str, str]


def read_fields(line: TaskLine) -> LineFields:
    """Read the line's own fields and ``--resources``: a field's text that is not a valid value
    but is a Python expression (``--cpu "min(8, len(files))"``) is dynamic; anything else that
    is not a valid value is a :class:`SpecError` naming it."""
    extra = dict(line.extra) or None
    with contextlib.suppress(SpecError):  # as a rule every field is a value: one request
        return LineFields(Resources(**_values(line.fields), extra=extra), {})
    fixed: dict[str, Any] = {}
    dynamic: dict[str, str] = {}
    for name, text in line.fields.items():
        try:
            fixed[name] = getattr(Resources(**_values({name: text})), name)
        except SpecError:
            if not is_expression(text):
                raise
            dynamic[name] = text
    return LineFields(Resources(**fixed, extra=extra), dynamic)


def build_request(
    line: TaskLine,
    presets: Callable[[], Mapping[str, Resources]],
    environments: Mapping[str, Environment],
    namespace: Mapping[str, Any],
) -> Resources:
    """The request a line stands for: environment, then preset, then the line's own fields.

    Each layer replaces the one before it field by field. A dynamic field (see
    :func:`read_fields`) is evaluated in ``namespace`` now, so it can depend on inputs.
    ``presets`` is called only when the line names a preset (reading them costs a file read).
    """
    base = base_request(line, presets, environments, namespace)
    own = read_fields(line)
    evaluated = {name: _evaluated(name, text, namespace) for name, text in own.dynamic.items()}
    fields = own.fixed.override(Resources(**evaluated)) if evaluated else own.fixed
    return base.override(fields)


def base_request(
    line: TaskLine,
    presets: Callable[[], Mapping[str, Resources]],
    environments: Mapping[str, Environment],
    namespace: Mapping[str, Any],
) -> Resources:
    """What a line's environment and then its preset ask for, before its own fields."""
    request = Resources()
    if line.env is not None:
        if line.env not in environments:
            known = ", ".join(sorted(environments)) or "none defined yet; use %task_env NAME ..."
            raise SpecError(f"--env {line.env!r} is not a defined environment ({known})")
        request = _environment(environments[line.env], namespace)
    if line.preset is not None:
        request = request.override(get_preset(line.preset, presets()))
    return request


def _environment(environment: Environment, namespace: Mapping[str, Any]) -> Resources:
    """An environment's request; one made in Python may compute fields, evaluated here as the
    line's own expressions are."""
    resources = environment.resources
    if isinstance(resources, ResourceTemplate):
        return resources.resolve(namespace)
    return resources or Resources()


def _values(fields: Mapping[str, str]) -> dict[str, Any]:
    """The line's texts as values of their fields: ``"1,4"`` is a (request, limit) pair for
    the ranged fields."""
    values: dict[str, Any] = {}
    for name, text in fields.items():
        parts = [p.strip() for p in text.split(",")] if name in RANGED_FIELDS else []
        values[name] = tuple(parts) if len(parts) == 2 else text
    return values


def _evaluated(name: str, text: str, namespace: Mapping[str, Any]) -> Any:
    """The value of expression ``text`` for field ``name``, by the evaluator the Python API and
    exported workflows use (:class:`~taskcell.spec.Expression` in a ``ResourceTemplate``)."""
    template = ResourceTemplate(**{name: Expression(text)})
    try:
        return getattr(template.resolve(namespace), name)
    except SpecError:
        raise
    except Exception as e:
        raise SpecError(
            f"--{name} {text!r} is neither a valid value nor an expression that can be "
            f"evaluated here ({type(e).__name__}: {e}). {_why_invalid(name, text)}"
        ) from None


def _why_invalid(name: str, text: str) -> str:
    """Why ``text`` is not a valid value of ``name`` (the spec's message)."""
    try:
        Resources(**_values({name: text}))
    except SpecError as invalid:
        return str(invalid)
    return ""


def is_expression(text: str) -> bool:
    """Whether ``text`` is Python that reads a name (``len(files)``), not a mistyped value."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # MemoryError, RecursionError: CPython's answer to deep nesting ("-" * 10**5 + "1");
        # ValueError: a NUL byte, before Python 3.12.
        return False
    return any(isinstance(node, ast.Name) for node in ast.walk(tree))
