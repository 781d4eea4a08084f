"""Environments: named resource defaults that tasks share, as Flyte's ``TaskEnvironment``.

How an environment and a task's own request combine (tested):

- **In taskcell, field by field.** ``%%task --env etl --memory 16Gi``,
  ``env.task(resources=...)`` and :meth:`Environment.override` replace each field the task sets
  (whole: both sides of a range, the whole ``extra`` mapping) and keep the environment's value
  for every field it leaves unset. So an environment with ``cpu=2, memory="8Gi"`` overridden
  with ``memory="16Gi"`` asks for ``cpu=2, memory="16Gi"``.
- **In Flyte 2, whole.** ``@env.task`` takes no resources; ``task.override(resources=R)`` and
  ``env.clone_with(name, resources=R)`` replace the environment's request with ``R`` as a
  whole (flyte 2.12.1 ``TaskTemplate.override``: ``resources or self.resources``): a field ``R``
  leaves unset is unset, not the environment's. taskcell's ``Task.override(resources=...)``
  (:mod:`taskcell.tasks`) does the same, for code written against Flyte.

The ``flyte`` exporter writes each task's whole, already combined, request, so the exported
module asks Flyte for what the notebook asked taskcell for under either reading.

A dynamic field (callable or :class:`~taskcell.spec.dynamic.Expression`) in either side counts
as set, and the result is then a :class:`~taskcell.spec.dynamic.ResourceTemplate`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from taskcell.errors import SpecError
from taskcell.spec._util import did_you_mean, shown
from taskcell.spec.dynamic import ResourceTemplate
from taskcell.spec.resources import FIELDS, Resources


def _request(fields: dict[str, Any]) -> Resources | ResourceTemplate:
    unknown = [name for name in fields if name not in FIELDS]
    if unknown:
        hint = did_you_mean(unknown[0], FIELDS)
        raise SpecError(
            f"override() got unknown field(s) {', '.join(map(repr, unknown))}{hint} "
            f"(known: resources, {', '.join(FIELDS)})"
        )
    template = ResourceTemplate(**fields)
    return template if template.is_dynamic else template.fixed


@dataclass(frozen=True)
class Environment:
    """A named set of resource defaults.

    Parameters
    ----------
    name : str
        E.g. ``"ml-training"``.
    resources : Resources or ResourceTemplate, optional
        The request every task in the environment makes unless it overrides it.

    Raises
    ------
    SpecError
        For an empty name or resources of another type.

    Examples
    --------
    >>> env = Environment("etl", Resources(cpu=2, memory="8Gi"))
    >>> env.override(memory="16Gi").resources
    Resources(cpu=2, memory='16Gi')
    """

    name: str
    resources: Resources | ResourceTemplate | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError(f"an environment needs a non-empty name, got {shown(self.name)}")
        if not isinstance(self.resources, Resources | ResourceTemplate | None):
            raise SpecError(
                f"resources= of environment {self.name!r} must be a Resources or a "
                f"ResourceTemplate, got {shown(self.resources)}"
            )

    def override(
        self, resources: Resources | ResourceTemplate | None = None, **fields: Any
    ) -> Environment:
        """Return a copy whose request is this one overridden field by field (taskcell's rule).

        Parameters
        ----------
        resources : Resources or ResourceTemplate, optional
            The overriding request.
        **fields
            Or the overriding fields directly (``memory="16Gi"``, ``cpu=callable``); not both.

        Returns
        -------
        Environment
            Same name; fields set in the override replace the environment's, others are kept.

        Raises
        ------
        SpecError
            For both ``resources`` and fields, an unknown field, or a malformed value.
        """
        if resources is not None and fields:
            raise SpecError("override() takes resources= or resource fields, not both")
        other = _request(fields) if fields else resources
        if other is None:
            return self
        if not isinstance(other, Resources | ResourceTemplate):
            raise SpecError(
                f"override() takes a Resources or a ResourceTemplate, got {shown(other)}"
            )
        base = self.resources
        if base is None:
            combined = other
        elif isinstance(base, Resources) and isinstance(other, Resources):
            combined = base.override(other)
        elif isinstance(base, Resources):
            combined = ResourceTemplate.from_resources(base).override(other)
        else:
            combined = base.override(other)
        return dataclasses.replace(self, resources=combined)
