"""The Python API: functions that run as resource-annotated Dask tasks.

Latch's spelling (``@small_task``, ``@custom_task(cpu=..., memory=...)``) and Flyte's
(``env = TaskEnvironment("training", resources=Resources(...))``, ``@env.task``) both give a
:class:`Task`; calling it submits the function to the current Dask client with the mapped
resources and returns a ``distributed.Future``.

>>> @small_task
... def load(path): ...
>>> future = load("a.csv")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from taskcell import config
from taskcell.cluster.connect import current_client
from taskcell.cluster.submit import submit
from taskcell.errors import SpecError
from taskcell.spec import (
    BUILTIN_PRESETS,
    Environment,
    Resources,
    ResourceTemplate,
    get_preset,
    latch_custom,
    parse_retries,
)

if TYPE_CHECKING:
    from distributed import Future

P = ParamSpec("P")
R = TypeVar("R")


class Task(Generic[P, R]):
    """A function that runs as a Dask task under a resource request when called."""

    def __init__(
        self,
        fn: Callable[P, R],
        resources: Resources | ResourceTemplate,
        *,
        name: str | None = None,
        retries: int = 0,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.retries = parse_retries(retries, f"task {self.name!r} retries=")
        self._signature = inspect.signature(fn)
        if isinstance(resources, ResourceTemplate):
            resources.check_params(list(self._signature.parameters), self.name, self._globals)
        self.resources = resources
        functools.update_wrapper(self, fn)

    def request(self, *args: P.args, **kwargs: P.kwargs) -> Resources:
        """The request for one call: dynamic resources are evaluated against its arguments."""
        if not isinstance(self.resources, ResourceTemplate):
            return self.resources
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return self.resources.resolve(bound.arguments, self._globals)

    @property
    def _globals(self) -> dict[str, Any]:
        """The function's module globals, which a resource expression may read (its imports)."""
        return getattr(self.fn, "__globals__", {})

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Future:
        """Submit one call to the current cluster; a unique key per call."""
        request = self.request(*args, **kwargs)
        return submit(
            current_client(),
            self.fn,
            *args,
            request=request,
            name=self.name,
            retries=self.retries,
            **kwargs,
        )

    def override(
        self,
        *,
        resources: Resources | ResourceTemplate | None = None,
        retries: int | None = None,
    ) -> Task[P, R]:
        """Flyte's ``task.override(...)``: the same function under a new request.

        As in Flyte 2, ``resources`` replaces the task's request **whole**: a field it leaves
        unset is unset, not kept from the environment (``env.task(resources=...)`` and
        ``%%task --env`` combine field by field instead; see :mod:`taskcell.spec.environment`).

        Parameters
        ----------
        resources : Resources or ResourceTemplate, optional
            The new request; the task's own when None.
        retries : int, optional
            The new number of retries; the task's own when None.

        Returns
        -------
        Task
            A new task; this one is unchanged.

        Raises
        ------
        SpecError
            For resources of another type, or a resource function naming a parameter the task
            does not have.
        """
        if resources is not None and not isinstance(resources, Resources | ResourceTemplate):
            raise SpecError(
                f"override() resources= must be a Resources or a ResourceTemplate, "
                f"got {resources!r}"
            )
        return Task(
            self.fn,
            self.resources if resources is None else resources,
            name=self.name,
            retries=self.retries if retries is None else retries,
        )

    def __repr__(self) -> str:
        return f"<Task {self.name} {self.resources!r}>"


def _decorator(resources: Resources | ResourceTemplate) -> Callable:
    """A decorator usable bare (``@d``) or with options (``@d(retries=2)``)."""

    def decorate(fn: Callable | None = None, /, **options: Any) -> Any:
        if fn is None:
            return lambda f: Task(f, resources, **options)
        return Task(fn, resources, **options)

    return decorate


def task(
    fn: Callable | None = None,
    /,
    *,
    resources: Resources | ResourceTemplate | None = None,
    **options: Any,
) -> Any:
    """Flyte's ``@task(resources=Resources(...))``: a task with its own request."""
    return _decorator(resources or Resources())(fn, **options)


def preset_task(name: str) -> Callable:
    """The decorator of the preset ``name`` (Latch's, or one from pyproject / Dask config)."""
    return _decorator(get_preset(name, config.presets()))


def custom_task(
    cpu: Any = None, memory: Any = None, storage_gib: Any = None, **options: Any
) -> Callable[[Callable], Task]:
    """Latch's ``@custom_task(cpu, memory, storage_gib)``: memory and storage in GiB.

    Any of them may be a function of the task's parameters, evaluated per call; a function
    that names a parameter the task does not have is refused here, at definition.
    """
    template = latch_custom(cpu=cpu, memory=memory, storage_gib=storage_gib)
    if "retries" in options:  # refused where it is written, not at the first call
        options["retries"] = parse_retries(options["retries"], "custom_task() retries=")
    return lambda fn: Task(fn, template, **options)


class TaskEnvironment(Environment):
    """Flyte's ``TaskEnvironment``: named default resources for the tasks defined with it.

    ``@env.task`` uses the environment's request. ``@env.task(resources=...)`` (taskcell's;
    Flyte's ``@env.task`` takes no resources) replaces its fields one by one: fields it leaves
    unset keep the environment's value. ``task.override(resources=...)`` replaces the whole
    request, as in Flyte.
    """

    def task(
        self, fn: Callable | None = None, /, *, resources: Resources | None = None, **options: Any
    ) -> Any:
        request = self.override(resources=resources).resources if resources else self.resources
        return _decorator(request or Resources())(fn, **options)


small_task = _decorator(BUILTIN_PRESETS["small_task"])
medium_task = _decorator(BUILTIN_PRESETS["medium_task"])
large_task = _decorator(BUILTIN_PRESETS["large_task"])
small_gpu_task = _decorator(BUILTIN_PRESETS["small_gpu_task"])
large_gpu_task = _decorator(BUILTIN_PRESETS["large_gpu_task"])
v100_x1_task = _decorator(BUILTIN_PRESETS["v100_x1_task"])
v100_x4_task = _decorator(BUILTIN_PRESETS["v100_x4_task"])
v100_x8_task = _decorator(BUILTIN_PRESETS["v100_x8_task"])
g6e_xlarge_task = _decorator(BUILTIN_PRESETS["g6e_xlarge_task"])
g6e_2xlarge_task = _decorator(BUILTIN_PRESETS["g6e_2xlarge_task"])
g6e_4xlarge_task = _decorator(BUILTIN_PRESETS["g6e_4xlarge_task"])
g6e_8xlarge_task = _decorator(BUILTIN_PRESETS["g6e_8xlarge_task"])
g6e_12xlarge_task = _decorator(BUILTIN_PRESETS["g6e_12xlarge_task"])
g6e_16xlarge_task = _decorator(BUILTIN_PRESETS["g6e_16xlarge_task"])
g6e_24xlarge_task = _decorator(BUILTIN_PRESETS["g6e_24xlarge_task"])
