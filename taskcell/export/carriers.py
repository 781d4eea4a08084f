"""The process-wide state ``%%task`` carries, as source a standalone module carries.

A ``flyte`` or ``latch`` module runs without taskcell, yet must carry what a ``%%task`` cell
carries: every carrier of :mod:`taskcell.runner.process_state`, those a user registered
included. Each carrier's functions are shipped as source with what they name (the functions,
classes, constants and modules of their own module), or, where a function is importable from
a library (``torch.random.get_rng_state``), as a reference imported when it is called. The
shipped code runs in a namespace of its own, so the notebook's names (the module's globals)
never rebind it.

A carrier that cannot be shipped (it calls taskcell, or names an object that has no source) is
left out where the notebook never imports its module, and refused by name where it does.

The same holds for the changes a task made in place (:func:`inplace_source`): the ``flyte``
target's driver applies them with :mod:`taskcell.runner.inplace` itself, that module's source
shipped whole.

So is the notebook's Dask client (:func:`local_dask`, which :mod:`~taskcell.export.flow` writes
in place of the notebook's ``Client(...)``): in each task that uses it, a real
``distributed.Client`` on a cluster of the task's own, made with the notebook's arguments, on
127.0.0.1, closed when the task ends. Between tasks a client travels as its arguments, a Future
as it ended (made again under its key on the next task's cluster), and a Dask collection that
holds Futures with their data (:func:`~taskcell.export.standalone.portable` asks for them).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types
from collections.abc import Callable, Collection, Iterable
from typing import Any

from taskcell.errors import ExportError
from taskcell.runner import inplace, process_state

__all__ = ["Unshippable", "carriers_source", "inplace_source", "local_dask"]


class Unshippable(ValueError):
    """A carrier's function names something a module without taskcell cannot have."""


def carriers_source(
    capture: str,
    apply: str,
    modules: Iterable[str],
    target: str,
    private: Callable[[str], str] = "_{}".format,
) -> str:
    """Source defining ``capture()`` (the state, by carrier name) and ``apply(state)``, for
    every registered carrier that can be shipped; the one other name it defines is
    ``private("CARRIERS")`` (a name the notebook does not use).

    Raises
    ------
    ExportError
        For a carrier that cannot be shipped whose module the notebook imports (``modules``:
        top-level names), naming it.
    """
    imported = {m.partition(".")[0] for m in modules}
    shipped = _Shipped()
    rows = []
    for carrier in process_state.registered():
        try:
            rows.append(
                f"({carrier.name!r}, {carrier.module!r}, {shipped.function(carrier.get)}, "
                f"{shipped.function(carrier.set)}, {carrier.returns!r})"
            )
        except Unshippable as e:
            if carrier.module.partition(".")[0] in imported:
                raise ExportError(
                    f"the process-wide state {carrier.name!r} (a carrier of "
                    f"taskcell.runner.process_state) cannot travel in a {target} module: {e}"
                ) from None
    listed = "".join(f"    {row},\n" for row in rows)
    code = "\n\n\n".join(["from __future__ import annotations", *shipped.parts])
    code += f"\n\n\nCARRIERS = [\n{listed}]"
    return _RUNTIME.format(
        capture=capture, apply=apply, carriers=private("CARRIERS"), code=_quoted(code)
    )


def _quoted(code: str) -> str:
    """``code`` as the text of a triple-quoted string literal."""
    return code.replace("\\", "\\\\").replace('"""', '\\"""')


_RUNTIME = '''\
# taskcell's carriers of process-wide state, in a namespace of their own.
{carriers} = {{"__name__": "taskcell_carriers"}}
exec(
    """
{code}
""",
    {carriers},
)
{carriers} = {carriers}["CARRIERS"]


def {capture}():
    """The process-wide state a notebook's cells share and a task starts from, as %%task
    carries it (each piece only where its module is imported)."""
    import sys

    return {{name: get() for name, module, get, _, _ in {carriers} if module in sys.modules}}


def {apply}(state, returned=False):
    """Take the state {capture}() captured (only what comes back from a cell, if returned)."""
    for name, _, _, set_state, returns in {carriers}:
        if name in state and (returns or not returned):
            set_state(state[name])
'''


def inplace_source(name: str, private: Callable[[str], str] = "_{}".format) -> str:
    """Source defining ``name(olds, news, outputs)``: what the names hold after a task changed
    copies of ``olds`` into ``news`` and made ``outputs``. Each old object is changed in place
    to match where it can take the change (every other name for it sees it), else its new
    one stands; an output holding a part so matched holds the notebook's object: what
    :class:`taskcell.runner.inplace.Updates` does for a ``%%task`` cell, by that module's own
    source, run in a namespace of its own, ``private("INPLACE")``."""
    code = _module_source(inplace, absent={"RemoteValue"})
    return _INPLACE.format(name=name, inplace=private("INPLACE"), code=_quoted(code))


_INPLACE = '''\
# taskcell's changes in place (taskcell.runner.inplace), in a namespace of their own.
{inplace} = {{"__name__": "taskcell_inplace"}}
exec(
    """
{code}
""",
    {inplace},
)


def {name}(olds, news, outputs):
    """What the names hold after a task changed copies of ``olds`` into ``news`` and made
    ``outputs``: each old object changed in place where it can take the change, else its new
    one; the outputs holding the notebook's objects where they hold parts so matched."""
    updates = {inplace}["Updates"]()
    taken = updates.update_all(dict(enumerate(zip(olds, news))))
    kept = [old if taken[i] else new for i, (old, new) in enumerate(zip(olds, news))]
    return (*kept, *map(updates.resolved, outputs))
'''


def _module_source(module: types.ModuleType, absent: Collection[str]) -> str:
    """The whole source of one of taskcell's modules, for a module without taskcell. Each name
    it imports from taskcell must be one of ``absent``: a class no value there is an instance
    of, which becomes an empty class of its own.

    Raises
    ------
    Unshippable
        For any other use of taskcell.
    """
    text = inspect.getsource(module)
    lines = text.splitlines()
    tree = ast.parse(text)
    top = tree.body
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and _from_taskcell(node):
            names = {alias.asname or alias.name for alias in node.names}
            if not isinstance(node, ast.ImportFrom) or names - set(absent) or node not in top:
                raise Unshippable(f"{module.__name__} uses taskcell beyond {sorted(absent)}")
    for node in reversed(top):
        if isinstance(node, ast.ImportFrom) and _from_taskcell(node):
            classes = [f"class {alias.asname or alias.name}:\n    pass" for alias in node.names]
            lines[node.lineno - 1 : node.end_lineno] = classes
    return "\n".join(lines)


def _from_taskcell(node: ast.Import | ast.ImportFrom) -> bool:
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
    return any((m or "").partition(".")[0] == "taskcell" for m in modules)


class _Shipped:
    """The source shipped so far, and the names it defines."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.names: dict[int, str] = {}  # id of a shipped object -> its name in the namespace

    def function(self, fn: Callable[..., Any]) -> str:
        """The name of ``fn`` in the shipped namespace, shipping it first."""
        if id(fn) in self.names:
            return self.names[id(fn)]
        module = getattr(fn, "__module__", None) or ""
        qualname = getattr(fn, "__qualname__", "")
        if _importable(module, qualname):
            name = f"_ref_{len(self.names)}"
            path = qualname.split(".")
            self.parts.append(
                f"def {name}(*args):\n    import importlib\n\n"
                f"    found = importlib.import_module({module!r})\n"
                f"    for part in {path!r}:\n        found = getattr(found, part)\n"
                f"    return found(*args)"
            )
            self.names[id(fn)] = name
            return name
        return self._source(fn)

    def _source(self, obj: Any) -> str:
        """Ship a function or class by its source, with the globals it names."""
        name = getattr(obj, "__name__", "")
        if "<" in getattr(obj, "__qualname__", "<") or not isinstance(
            obj, type | types.FunctionType
        ):
            raise Unshippable(f"{obj!r} has no source a module can carry")
        try:
            text = textwrap.dedent(inspect.getsource(obj))
        except (OSError, TypeError):
            raise Unshippable(f"{name} has no source a module can carry") from None
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                found.append(getattr(node, "module", None) or "")
                if any(m.partition(".")[0] == "taskcell" for m in found):
                    raise Unshippable(f"{name} calls taskcell, which the module does not have")
        self.names[id(obj)] = name
        namespace = getattr(obj, "__globals__", None) or vars(inspect.getmodule(obj))
        for used in sorted(_names(tree) - {name}):
            if used in namespace:
                self._global(used, namespace[used])
        self.parts.append(text.rstrip())
        return name

    def _global(self, name: str, value: Any) -> None:
        """Ship one global a shipped function names: a module, function, class or constant
        (a decorated function once, as its source with its decorators)."""
        if id(value) in self.names or id(getattr(value, "__wrapped__", value)) in self.names:
            return
        module = getattr(value, "__module__", None) or ""
        qualname = getattr(value, "__qualname__", "")
        if isinstance(value, types.ModuleType):
            self.names[id(value)] = name
            self.parts.insert(0, f"import {value.__name__} as {name}")
        elif callable(value) and _importable(module, qualname) and "." not in qualname:
            self.names[id(value)] = name
            self.parts.insert(0, f"from {module} import {qualname} as {name}")
        elif callable(value):
            self._source(getattr(value, "__wrapped__", value))
        elif _literal(value):
            self.names[id(value)] = name
            self.parts.append(f"{name} = {_repr(value)}")
        else:
            raise Unshippable(f"it names {name}, a {type(value).__name__}")


def _importable(module: str, qualname: str) -> bool:
    """Whether a function can be imported where the module runs: a library's, by its name."""
    return (
        bool(module)
        and module.partition(".")[0] not in ("taskcell", "__main__", "builtins")
        and "<" not in qualname
    )


def _names(tree: ast.AST) -> set[str]:
    """The names a piece of source reads or declares global."""
    found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.update(node.names)
    return found


def _repr(value: Any) -> str:
    """``repr(value)``, a frozenset's members in order: a module is written the same each time,
    whatever the process's hash seed."""
    if isinstance(value, frozenset):
        return (
            f"frozenset({{{', '.join(sorted(_repr(v) for v in value))}}})"
            if value
            else "frozenset()"
        )
    return repr(value)


def _literal(value: Any) -> bool:
    """Whether ``repr(value)`` is Python that makes it again."""
    try:
        return bool(ast.literal_eval(repr(value)) == value) or value is None
    except (ValueError, SyntaxError):
        return isinstance(value, frozenset) and all(_literal(v) for v in value)


# -- the notebook's Dask client, as a real one in each task ----------------------------------------


def local_dask(kind: str = "Client", *args: Any, **kwargs: Any) -> Any:
    """The notebook's ``Client(...)``, ``LocalCluster(...)`` or ``get_client()`` in a task: a
    real ``distributed.Client`` (or ``LocalCluster``) on a cluster of the task's own, the notebook's
    size, listening on 127.0.0.1 only, closed when the task ends.

    ``local_dask("task")`` is the decorator of every task: the clients and clusters a task makes
    or receives are its own, and closed when it returns. A client that travels to another task
    travels as its arguments, and becomes a client of that task's own cluster there;
    ``local_dask("leaving", value)`` is ``value`` as it leaves its task (its Futures as they
    ended, which :func:`~taskcell.export.standalone.portable` carries), and
    ``local_dask("here", value)`` a value from a task, its Futures made on this one's cluster.
    """
    import contextvars
    import functools
    import inspect
    import sys
    import types

    import distributed

    state: Any = sys.modules.get("_taskcell_local_dask")
    if state is None:
        state = types.ModuleType("_taskcell_local_dask")
        state.scope = contextvars.ContextVar("taskcell_dask_scope", default=None)
        frame = sys._getframe()
        state.helper = frame.f_globals[frame.f_code.co_name]  # this function, by its name here

        def reduce(self: Any) -> tuple:
            kind, args, kwargs = self._taskcell_call
            return functools.partial(state.helper, "lazy", kind, **kwargs), args

        class Lazy:
            """A client or cluster that came from another task: made here when first used."""

            def __init__(self, kind: str, args: tuple, kwargs: dict) -> None:
                self._taskcell_call, self.real = (kind, args, kwargs), None

            def made(self) -> Any:
                if self.real is None:
                    kind, args, kwargs = self._taskcell_call
                    self.real = state.helper(kind, *args, **kwargs)
                return self.real

            def __getattr__(self, name: str) -> Any:
                if name in ("_taskcell_call", "real"):
                    raise AttributeError(name)
                return getattr(self.made(), name)

            __reduce__ = reduce

        class Done:
            """A Future leaving its task: its key, and how it ended (it waits for that)."""

            def __init__(self, future: Any) -> None:
                distributed.wait(future)
                status, payload = future.status, None
                if status == "finished":
                    payload = future.result()
                elif status == "error":
                    payload = future.exception()
                self.ended = (future.key, status, payload)

            def __reduce__(self) -> tuple:
                return functools.partial(state.helper, "future"), self.ended

        class LazyFuture:
            """A Future from another task: made again on this task's cluster when first used,
            under its key, as it ended."""

            def __init__(self, key: Any, status: str, payload: Any) -> None:
                self.ended = (key, status, payload)
                self.real: Any = None

            def made(self) -> Any:
                if self.real is None:
                    key, status, payload = self.ended
                    scope = [o for o in state.scope.get() or () if isinstance(o, state.Client)]
                    client = scope[-1] if scope else state.helper("Client", processes=False)
                    if status == "finished":
                        self.real = client.scatter({key: payload}, hash=False)[key]
                    else:
                        self.real = client.submit(state.fail, payload, key=key, pure=False)
                        distributed.wait(self.real)
                        if status != "error":  # cancelled, lost: it has no value
                            self.real.cancel()
                return self.real

            def __getattr__(self, name: str) -> Any:
                if name in ("ended", "real"):
                    raise AttributeError(name)
                return getattr(self.made(), name)

            def __reduce__(self) -> tuple:
                return functools.partial(state.helper, "future"), self.ended

        def fail(error: BaseException | None) -> None:
            raise error or RuntimeError("this Dask Future was cancelled in the task that made it")

        state.Lazy, state.Done, state.LazyFuture, state.fail = Lazy, Done, LazyFuture, fail
        state.Client = type("Client", (distributed.Client,), {"__reduce__": reduce})
        state.Cluster = type("LocalCluster", (distributed.LocalCluster,), {"__reduce__": reduce})
        sys.modules[state.__name__] = state

    def each(value: Any, change: Any) -> Any:
        """``value`` with ``change`` applied to each item of its lists, tuples, sets and dicts
        (a container is new only where an item changed)."""
        if type(value) in (list, tuple, set):
            items = [each(v, change) for v in value]
            same = all(new is old for new, old in zip(items, value, strict=True))
            return value if same else type(value)(items)
        if type(value) is dict:
            made = {k: each(v, change) for k, v in value.items()}
            return value if all(made[k] is v for k, v in value.items()) else made
        return change(value)

    def leaving(value: Any) -> Any:
        """A Future as it ended; a Dask collection holding Futures (one persisted) rebuilt
        around their data: the Futures end with the task's cluster, the data travels."""
        from dask import is_dask_collection
        from dask.core import flatten
        from distributed.client import futures_of

        if isinstance(value, distributed.Future):
            return state.Done(value)
        if not is_dask_collection(value) or not futures_of(value):
            return value
        keys = list(flatten(value.__dask_keys__()))
        data = futures_of(value)[0].client.get(dict(value.__dask_graph__()), keys)
        rebuild, extra = value.__dask_postpersist__()
        return rebuild(dict(zip(keys, data, strict=True)), *extra)

    def real(value: Any) -> Any:
        """``value`` with the clients, then the Futures, from other tasks made here."""
        value = each(value, lambda v: v.made() if isinstance(v, state.Lazy) else v)
        return each(value, lambda v: v.made() if isinstance(v, state.LazyFuture) else v)

    if kind == "here":  # values a task gave the driver
        return real(args[0])
    if kind == "future":
        return state.LazyFuture(*args)
    if kind == "leaving":  # a value leaving its task: its Futures with how they ended
        return each(args[0], leaving)

    if kind == "task" and not args:
        return functools.partial(state.helper, "task")
    if kind == "task":
        fn = args[0]

        def close(made: list) -> None:
            for obj in reversed(made):
                obj.close()

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*a: Any, **k: Any) -> Any:
                made: list = []
                token = state.scope.set(made)
                try:
                    return await fn(*real(a), **real(k))
                finally:
                    state.scope.reset(token)
                    close(made)

            return run_async

        @functools.wraps(fn)
        def run(*a: Any, **k: Any) -> Any:
            made: list = []
            token = state.scope.set(made)
            try:
                return fn(*real(a), **real(k))
            finally:
                state.scope.reset(token)
                close(made)

        return run

    if kind == "lazy":
        return state.Lazy(args[0], args[1:], kwargs)
    made = state.scope.get()
    clients = [obj for obj in made or () if isinstance(obj, distributed.Client)]
    if kind == "get_client" and clients:
        return clients[-1]
    # The call's size and kind; not what would reach beyond the task (an address, a dashboard).
    sizes = ("n_workers", "threads_per_worker", "processes", "memory_limit", "resources")
    own = ("name", "timeout", "set_as_default", "direct_to_workers", "serializers")
    options = {k: v for k, v in kwargs.items() if k in (*sizes, *own, "silence_logs")}
    cluster = next(
        (a for a in [*real(args), real(kwargs.get("address"))] if isinstance(a, state.Cluster)),
        None,
    )
    # Listening on loopback only: the scheduler, the workers and their HTTP servers (which a
    # dashboard_address of None does not stop).
    where = {"dashboard_address": "127.0.0.1:0", "worker_dashboard_address": "127.0.0.1:0"}
    if options.get("processes", True) is not False or kind not in ("Client", "LocalCluster"):
        where["host"] = "127.0.0.1"  # not without processes: inproc takes no host
    if kind.endswith("Cluster"):
        kept = options if kind == "LocalCluster" else {}
        obj = state.Cluster(**where, **kept)
    elif cluster is not None:
        obj = state.Client(cluster, **{k: v for k, v in options.items() if k in own})
    else:
        obj = state.Client(**where, **options)
    obj._taskcell_call = (kind, args, kwargs)
    if made is not None:
        made.append(obj)
    return obj
