"""Dynamic resources: a request computed from a task's inputs when it is submitted.

Each field of a :class:`ResourceTemplate` is a fixed value (checked when the template is made),
a callable, or an :class:`Expression` (a string of Python, compiled when it is made).

Callables follow Latch's rule (seed 001): a resource function is called with the task's
arguments that it names, so its parameters must be among the task's; one that also takes
``**kwargs`` receives every argument of the task. :meth:`ResourceTemplate.check_params` refuses a
function naming a parameter the task does not have when the task is defined, not when it runs.
A parameter with a default need not be among the task's (it keeps its default).

An expression is evaluated by :meth:`Expression.evaluate`, the one evaluator of the ``%%task``
magic, the Python API and the exported workflow module: its names are the task's arguments, then
the globals of the code that defines the task (the notebook's namespace for ``%%task``, the
task function's module for the API), then the builtins. Every name is a global of the
evaluation, so comprehensions, generator expressions and lambdas inside it see them all.

An exception raised inside a resource function or expression propagates unchanged (it is the
user's own code and traceback); a result that is not a valid value for its field is a
:class:`~taskcell.errors.SpecError` naming the field and the function. A result of None leaves
the field unset.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, MappingProxyType
from typing import Any

from taskcell.errors import SpecError
from taskcell.spec._util import did_you_mean, read_number, shown
from taskcell.spec.resources import FIELDS, Resources, is_set

_GIB = 1024**3
_BUILTIN_NAMES = frozenset(dir(builtins))


def _free_names(tree: ast.AST) -> frozenset[str]:
    """Names an expression reads that it does not bind itself (comprehension targets, lambdas)."""
    loaded: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return frozenset(loaded - bound)


@dataclass(frozen=True)
class Expression:
    """A Python expression computing one resource field from the task's arguments.

    Parameters
    ----------
    source : str
        E.g. ``"min(8, len(files))"`` or ``"f'{2 * len(df) // 10**6 + 1}Gi'"``.

    Attributes
    ----------
    names : frozenset of str
        The names it reads from the task's arguments (builtins excluded).

    Raises
    ------
    SpecError
        If ``source`` is empty or not a valid Python expression.

    Examples
    --------
    >>> Expression("min(8, len(files))").evaluate({"files": [1, 2, 3]})
    3
    """

    source: str
    names: frozenset[str] = field(init=False, repr=False, compare=False)
    _code: CodeType = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source.strip():
            raise SpecError(
                f"a resource expression must be a non-empty string, got {shown(self.source)}"
            )
        try:
            tree = ast.parse(self.source.strip(), mode="eval")
        except SyntaxError as error:
            raise SpecError(
                f"resource expression {self.source!r} is not a valid Python expression: "
                f"{error.msg} (column {error.offset})"
            ) from None
        object.__setattr__(self, "names", _free_names(tree) - _BUILTIN_NAMES)
        object.__setattr__(self, "_code", compile(tree, "<resource expression>", "eval"))

    def __reduce__(self) -> tuple[type[Expression], tuple[str]]:
        # Code objects cannot be pickled; recompile from the source.
        return Expression, (self.source,)

    def evaluate(
        self, arguments: Mapping[str, Any], namespace: Mapping[str, Any] | None = None
    ) -> Any:
        """Evaluate with ``arguments``, then ``namespace``, then the builtins as the global names.

        Parameters
        ----------
        arguments : mapping
            The task's arguments by name.
        namespace : mapping, optional
            The globals of the code defining the task, read for names not among ``arguments``
            (a module's imports).

        Returns
        -------
        object
            The expression's value.
        """
        for name, given in (("arguments", arguments), ("namespace", namespace or {})):
            if not isinstance(given, Mapping):
                raise SpecError(
                    f"evaluate() takes {name} as a mapping of names to values, got {shown(given)}"
                )
        # One dict of globals: with separate locals, a comprehension or lambda inside the
        # expression could not see the names (``max(len(f) for f in files)``).
        return eval(self._code, {"__builtins__": builtins, **(namespace or {}), **arguments})


@dataclass(frozen=True)
class _Rule:
    """A dynamic field: its source, and how to turn a result into a Resources value."""

    source: Callable[..., Any] | Expression
    convert: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        if isinstance(self.source, Expression):
            return f"expression {self.source.source!r}"
        return f"resource function {self.name}"

    @property
    def name(self) -> str:
        return getattr(self.source, "__qualname__", repr(self.source))

    def signature(self, function: Callable[..., Any], field: str) -> inspect.Signature:
        """The signature of ``function``, this rule's source when it is not an expression."""
        try:
            return inspect.signature(function)
        except (TypeError, ValueError):
            raise SpecError(
                f"{field}= {self.describe()} has no signature taskcell can read; wrap it in a def"
            ) from None

    def check(
        self, field: str, params: Sequence[str], task_name: str, namespace: Mapping[str, Any]
    ) -> None:
        where = f"task {task_name!r} does not take (its parameters: {', '.join(params) or 'none'})"
        source = self.source
        if isinstance(source, Expression):
            missing = sorted(source.names - set(params) - namespace.keys())
            if missing:
                hint = did_you_mean(missing[0], params)
                raise SpecError(
                    f"{field}= {self.describe()} reads {', '.join(map(repr, missing))}, "
                    f"which {where}{hint}"
                )
            return
        for p in self.signature(source, field).parameters.values():
            if p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.kind is p.POSITIONAL_ONLY:
                raise SpecError(
                    f"{field}= {self.describe()} takes {p.name!r} positionally only; resource "
                    f"functions receive the task's arguments by name"
                )
            if p.name not in params:
                hint = did_you_mean(p.name, params)
                raise SpecError(
                    f"{field}= {self.describe()} takes parameter {p.name!r}, which {where}{hint}"
                )

    def evaluate(
        self, field: str, arguments: Mapping[str, Any], namespace: Mapping[str, Any]
    ) -> Any:
        source = self.source
        if isinstance(source, Expression):
            result = source.evaluate(arguments, namespace)
        else:
            result = source(**self._arguments_for(source, field, arguments))
        return result if self.convert is None else self.convert(result)

    def _arguments_for(
        self, function: Callable[..., Any], field: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The task arguments ``function`` names, or all of them if it takes ``**kwargs``."""
        parameters = self.signature(function, field).parameters.values()
        by_name = [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        absent = [p.name for p in by_name if p.name not in arguments and p.default is p.empty]
        if absent:
            raise SpecError(
                f"{field}= {self.describe()} needs argument(s) {', '.join(map(repr, absent))}, "
                f"not among the task's arguments ({', '.join(arguments) or 'none'})"
            )
        if any(p.kind is p.VAR_KEYWORD for p in parameters):
            return dict(arguments)
        return {p.name: arguments[p.name] for p in by_name if p.name in arguments}


def _as_rule(value: Any) -> _Rule | None:
    if isinstance(value, _Rule):
        return value
    if isinstance(value, Expression) or (callable(value) and not isinstance(value, type)):
        return _Rule(value)
    return None


@dataclass(frozen=True, init=False, repr=False)
class ResourceTemplate:
    """A request whose fields may be computed from the task's arguments at submit time.

    Parameters
    ----------
    cpu, memory, gpu, disk, shm, extra : optional
        Each a value :class:`~taskcell.spec.resources.Resources` accepts (checked now),
        a callable, or an :class:`Expression`.

    Attributes
    ----------
    fixed : Resources
        The fixed fields.
    dynamic : Mapping[str, Callable or Expression]
        The computed fields, by field name.

    Raises
    ------
    SpecError
        For a malformed fixed value or expression.

    Examples
    --------
    >>> def allocate_cpu(files, **kwargs):
    ...     return min(8, len(files))
    >>> template = ResourceTemplate(cpu=allocate_cpu, memory="8Gi")
    >>> template.check_params(["files", "count"], "my_task")
    >>> template.resolve({"files": ["a", "b"], "count": 1})
    Resources(cpu=2, memory='8Gi')
    """

    fixed: Resources
    _rules: Mapping[str, _Rule]

    def __init__(
        self,
        cpu: Any = None,
        memory: Any = None,
        gpu: Any = None,
        disk: Any = None,
        shm: Any = None,
        extra: Any = None,
    ) -> None:
        given = dict(zip(FIELDS, (cpu, memory, gpu, disk, shm, extra), strict=True))
        rules = {name: rule for name, value in given.items() if (rule := _as_rule(value))}
        fixed = {name: value for name, value in given.items() if name not in rules}
        object.__setattr__(self, "fixed", Resources(**fixed))
        object.__setattr__(self, "_rules", MappingProxyType(rules))

    def __hash__(self) -> int:
        return hash((self.fixed, tuple(self._rules.items())))

    def __repr__(self) -> str:
        shown = self.fixed._literals()
        for name, rule in self._rules.items():
            source = rule.source
            shown[name] = repr(source) if isinstance(source, Expression) else rule.name
        fields = ", ".join(f"{name}={shown[name]}" for name in FIELDS if name in shown)
        return f"ResourceTemplate({fields})"

    @classmethod
    def from_resources(cls, resources: Resources) -> ResourceTemplate:
        """Return the template with no dynamic fields equivalent to ``resources``."""
        return cls(**{name: getattr(resources, name) for name in FIELDS})

    @property
    def dynamic(self) -> Mapping[str, Callable[..., Any] | Expression]:
        """The computed fields, by field name."""
        return MappingProxyType({name: rule.source for name, rule in self._rules.items()})

    @property
    def is_dynamic(self) -> bool:
        """True when any field is computed."""
        return bool(self._rules)

    def check_params(
        self,
        task_params: Sequence[str],
        task_name: str,
        namespace: Mapping[str, Any] | None = None,
    ) -> None:
        """Refuse, at definition time, functions and expressions that need what the task lacks.

        Parameters
        ----------
        task_params : sequence of str
            The task function's parameter names (for a cell, the names it reads).
        task_name : str
            Named in the error.
        namespace : mapping, optional
            The globals of the code defining the task: names an expression may also read.

        Raises
        ------
        SpecError
            For a resource function with a parameter (without default) not among
            ``task_params``, or an expression reading such a name; the message names the field,
            the function, the parameter and the task's parameters.
        """
        params = list(task_params)
        for name, rule in self._rules.items():
            rule.check(name, params, task_name, namespace or {})

    def resolve(
        self, arguments: Mapping[str, Any], namespace: Mapping[str, Any] | None = None
    ) -> Resources:
        """Compute the request for one call of the task.

        Parameters
        ----------
        arguments : mapping
            The task's arguments by name.
        namespace : mapping, optional
            The globals of the code defining the task, for names an expression reads that are
            not among ``arguments`` (see :meth:`Expression.evaluate`).

        Returns
        -------
        Resources
            The fixed fields, with each computed field set to its result.

        Raises
        ------
        SpecError
            For a result that is not a valid value for its field, naming the field and the
            function or expression, or a function needing an argument that is not given.
        """
        computed: dict[str, Any] = {}
        for name, rule in self._rules.items():
            result = rule.evaluate(name, arguments, namespace or {})
            try:
                Resources(**{name: result})
            except SpecError as error:
                raise SpecError(
                    f"{name}= {rule.describe()} returned {shown(result)}, "
                    f"not a valid value: {error}"
                ) from error
            computed[name] = result
        return self.fixed.override(Resources(**computed))

    def override(self, other: Resources | ResourceTemplate) -> ResourceTemplate:
        """Return this template with every field that ``other`` sets replaced by ``other``'s.

        Parameters
        ----------
        other : Resources or ResourceTemplate
            The overriding request; its fixed and computed fields both count as set.

        Returns
        -------
        ResourceTemplate
        """
        if isinstance(other, Resources):
            other = ResourceTemplate.from_resources(other)
        if not isinstance(other, ResourceTemplate):
            raise SpecError(
                f"override() takes a Resources or a ResourceTemplate, got {shown(other)}"
            )
        fields = {}
        for name in FIELDS:
            source = other._source(name)
            fields[name] = self._source(name) if source is None else source
        return ResourceTemplate(**fields)

    def _source(self, name: str) -> Any:
        """What the field was made from: its rule, its fixed value, or None when unset."""
        value = self._rules.get(name, getattr(self.fixed, name))
        return value if is_set(value) else None

    def __reduce__(self) -> tuple[type[ResourceTemplate], tuple[Any, ...]]:
        # The read-only mapping of rules cannot be pickled; rebuild from the field sources.
        return ResourceTemplate, tuple(self._source(name) for name in FIELDS)


@dataclass(frozen=True)
class _LatchGiB:
    """Latch's units: a number is GiB (rounded up to a whole byte); text is a quantity."""

    zero_is_unset: bool

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        try:
            number = read_number(value, SpecError)
        except SpecError:
            return value  # not a number: Resources names what is wrong with it
        if number == 0 and self.zero_is_unset:
            return None
        return math.ceil(number * _GIB) if number > 0 else value


def latch_custom(cpu: Any, memory: Any, storage_gib: Any = None) -> ResourceTemplate:
    """Translate Latch's ``@custom_task(cpu, memory, storage_gib)`` into a template.

    Parameters
    ----------
    cpu : int or callable
        Cores, or a resource function returning cores.
    memory : int or callable
        GiB of memory (Latch's unit), or a function returning GiB; a string is read as a
        quantity (``"8Gi"``).
    storage_gib : int or callable, optional
        GiB of ephemeral storage, or a function returning GiB (as Latch's
        ``allocate_storage``). Zero means no storage request, since a GiB count floored with
        ``//`` is zero for small inputs.

    Returns
    -------
    ResourceTemplate

    Raises
    ------
    SpecError
        For malformed fixed values.

    Examples
    --------
    >>> latch_custom(cpu=4, memory=8, storage_gib=100).resolve({})
    Resources(cpu=4, memory='8Gi', disk='100Gi')
    """
    fields = {}
    for name, value, zero_is_unset in (("memory", memory, False), ("disk", storage_gib, True)):
        convert = _LatchGiB(zero_is_unset)
        rule = _as_rule(value)
        fields[name] = _Rule(rule.source, convert) if rule else convert(value)
    return ResourceTemplate(cpu=cpu, **fields)
