"""Environments: named resource defaults that tasks share, as Flyte's ``TaskEnvironment``.

Override semantics (tested): an override replaces the environment's request **field by field**.
A field the override sets replaces that field whole (both sides of a range, the whole ``extra``
mapping); a field it leaves unset keeps the environment's value. So an environment with
``cpu=2, memory="8Gi"`` overridden with ``memory="16Gi"`` keeps ``cpu=2``. This is Flyte's
reading: a task's own resources win "for that task only", on the fields it names.

A dynamic field (callable or :class:`~taskcell.spec.dynamic.Expression`) in either side counts
as set, and the result is then a :class:`~taskcell.spec.dynamic.ResourceTemplate`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from taskcell.errors import SpecError
from taskcell.spec._util import did_you_mean
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
            raise SpecError(f"an environment needs a non-empty name, got {self.name!r}")
        if not isinstance(self.resources, Resources | ResourceTemplate | None):
            raise SpecError(
                f"resources= of environment {self.name!r} must be a Resources or a "
                f"ResourceTemplate, got {self.resources!r}"
            )

    def override(
        self, resources: Resources | ResourceTemplate | None = None, **fields: Any
    ) -> Environment:
        """Return a copy whose request is this one overridden field by field.

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
            raise SpecError(f"override() takes a Resources or a ResourceTemplate, got {other!r}")
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
