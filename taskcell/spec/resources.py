"""`Resources`: one task's request, the one model every layer of taskcell shares.

It takes every form the seeds show (Flyte's ``Resources``, Latch's presets, Dask's abstract
resources) and keeps them parsed and canonical, so two requests written differently but asking
for the same thing are equal, hash alike and print alike.

Three spellings, each read back exactly:

- ``repr``: ``Resources(cpu=2, memory='4Gi', gpu='A100:2')`` -- what a person types.
- :meth:`Resources.to_dict` / :meth:`Resources.from_dict`: JSON-safe canonical strings, a
  ``[request, limit]`` list for a range, numbers for ``extra``.
- :meth:`Resources.to_options`: the ``%%task`` option form, read back by
  :mod:`taskcell.runner.task_line`,
  ``--cpu 2 --memory 8Gi,32Gi --gpu "A100 80G:1" --shm auto --resources process=1``;
  a range is written ``REQUEST,LIMIT``, ``extra`` as comma-separated ``name=amount`` pairs.

A request never says one thing twice: an ``extra`` resource that a field already asks for
(``gpu=2`` with ``extra={"GPU": 1}``, ``cpu=8`` with ``{"cpu": 1}``), compared without regard to
case with the Dask name the field is requested as, is refused naming both; so are two ``extra``
names that differ only in case, which taskcell matches to the same advertised resource (it
compares names without regard to case, since Dask lower-cases names set from the environment).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Literal

from taskcell.errors import SpecError
from taskcell.spec._util import (
    MAX_AMOUNT,
    did_you_mean,
    non_ascii_digits,
    read_number,
    shown,
)
from taskcell.spec.cpu import format_cpu, parse_cpu
from taskcell.spec.devices import GPU, Accelerator, format_gpu, parse_gpu
from taskcell.spec.quantity import format_quantity, parse_request_bytes
from taskcell.spec.ranges import Range, parse_range

FIELDS: tuple[str, ...] = ("cpu", "memory", "gpu", "disk", "shm", "extra")
"""The fields of :class:`Resources`, in the order they are shown."""

_EXTRA_NAME_RE = re.compile(r"[A-Za-z0-9_.:/+-]+", re.ASCII)
_EXTRA_FORMS = "a mapping of resource names to positive numbers such as {'process': 1}"

DASK_NAMES: Mapping[str, str] = MappingProxyType(
    {"cpu": "CPU", "memory": "MEMORY", "gpu": "GPU", "disk": "DISK", "shm": "SHM"}
)
"""The Dask resource each field is requested as (``taskcell.cluster.names`` reads it here);
``gpu`` only when it holds a :class:`~taskcell.spec.devices.GPU`."""


def resource_key(name: str) -> str:
    """The one case rule for Dask resource names: the form two names compare in (``"gpu"`` and
    ``"GPU"`` are one resource), since Dask lower-cases names set from the environment."""
    return name.casefold()


def meets(shape: Mapping[str, float], request: Mapping[str, float]) -> bool:
    """Whether a worker advertising ``shape`` has every Dask resource ``request`` asks for, in
    the amount asked, names compared by :func:`resource_key`."""
    has = {resource_key(name): amount for name, amount in shape.items()}
    return all(has.get(resource_key(name), 0.0) >= amount for name, amount in request.items())


_FIELD_OF = {resource_key(name): field for field, name in DASK_NAMES.items()}


REQUEST_FIELDS: tuple[str, ...] = tuple(DASK_NAMES)
"""The fields that each ask for one kind of resource (all but ``extra``): each is an option of
its own on a ``%%task`` line (``--cpu``), in Flyte's ``Resources`` and among Dask's names."""

# Fields that take a (request, limit) range: how to read and how to write one side.
_RANGED: dict[str, tuple[Callable[[Any, str], Any], Callable[[Any], str]]] = {
    "cpu": (parse_cpu, format_cpu),
    "memory": (parse_request_bytes, format_quantity),
    "disk": (parse_request_bytes, format_quantity),
}
RANGED_FIELDS: tuple[str, ...] = tuple(_RANGED)
"""The fields that take a ``(request, limit)`` range, written ``REQUEST,LIMIT`` on a line."""


def _range(value: Any, field: str) -> Range | None:
    return None if value is None else parse_range(value, *_RANGED[field], field)


def _shm(value: object) -> int | Literal["auto"] | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and not any(c.isdigit() for c in value):
        hint = did_you_mean(value.strip(), ["auto"])
        raise SpecError(
            f'shm= must be "auto" or a positive quantity such as "8Gi", got {shown(value)}{hint}'
        )
    return parse_request_bytes(value, "shm")


def _extra(value: object) -> Mapping[str, int | float]:
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise SpecError(f"extra= must be {_EXTRA_FORMS}, got {shown(value)}")
    checked: dict[str, int | float] = {}
    folded: dict[str, str] = {}
    for name, amount in value.items():
        if not isinstance(name, str) or not _EXTRA_NAME_RE.fullmatch(name):
            raise SpecError(
                f"extra= resource names are letters, digits and '_.:/+-', "
                f"got {shown(name)} in {shown(value)}"
            )
        key = resource_key(name)
        if key in folded:
            raise SpecError(
                f"extra= names {folded[key]!r} and {name!r} differ only in case; "
                f"taskcell reads them as one resource, so give it once"
            )
        folded[key] = name
        checked[name] = _extra_amount(name, amount)
    return MappingProxyType(dict(sorted(checked.items())))


def _extra_amount(
    name: str, amount: object, label: str = "extra= ", zero: bool = False
) -> int | float:
    """One amount of an abstract resource: positive (or 0 where ``zero``), at most
    :data:`MAX_AMOUNT`, an int when whole; ``label`` starts the error (``"extra= "``)."""

    def fail(detail: str) -> SpecError:
        least = "a number of 0 or more" if zero else "a positive number"
        return SpecError(
            f"{label}{name!r} must be {least} such as 1 or 70e9, "
            f"got {shown(amount)}{detail or non_ascii_digits(amount)}"
        )

    number = read_number(amount, fail)
    if number < 0 or (number == 0 and not zero):
        raise fail(" (not more than zero)" if not zero else " (a negative amount)")
    if number > MAX_AMOUNT:
        raise fail(f" (more than 2**62, about {float(MAX_AMOUNT):.1e}; no machine has that much)")
    return int(number) if number.denominator == 1 else float(number)


def parse_resource_pairs(text: str, *, zero: bool = False) -> dict[str, int | float]:
    """Read ``NAME=NUMBER`` pairs: the one grammar of ``--resources``, on a ``%%task`` line and
    for ``taskcell worker``, as ``dask worker --resources`` takes it.

    Parameters
    ----------
    text : str
        ``"GPU=2,process=1"`` or, as Dask writes it, ``"GPU=2 MEMORY=100e9"``.
    zero : bool, optional
        Whether an amount may be 0: a worker may advertise none of a resource, a task cannot
        ask for none.

    Returns
    -------
    dict of str to number
        Amounts by name, in the order given; an int when whole.

    Raises
    ------
    SpecError
        For a word that is not ``NAME=NUMBER`` with a name of letters, digits and
        ``'_.:/+-'`` and a number within bounds, or a name given twice (in any case); the
        message quotes the text and the bad pair.

    Examples
    --------
    >>> parse_resource_pairs("GPU=2 MEMORY=100e9")
    {'GPU': 2, 'MEMORY': 100000000000}
    """
    if not isinstance(text, str):
        raise SpecError(f'expected NAME=NUMBER pairs such as "GPU=2,process=1", got {shown(text)}')
    amounts: dict[str, int | float] = {}
    given: dict[str, str] = {}  # resource_key(name) -> the pair that gave it
    for pair in text.replace(",", " ").split():
        name, equals, amount = pair.partition("=")
        if not equals or not _EXTRA_NAME_RE.fullmatch(name):
            bad = "" if pair == text.strip() else f" (bad pair {pair!r})"
            raise SpecError(
                f"expected NAME=NUMBER pairs separated by commas or spaces, such as "
                f"\"GPU=2,process=1\", NAME of letters, digits and '_.:/+-', got {text!r}{bad}"
            )
        same = given.get(resource_key(name))
        if same is not None:
            raise SpecError(
                f"{text!r} names {same.partition('=')[0]!r} twice, {same} and {pair}; names are "
                f"compared without regard to case, so give it once"
            )
        given[resource_key(name)] = pair
        amounts[name] = _extra_amount(name, amount, label="", zero=zero)
    return amounts


def is_set(value: object) -> bool:
    """Return True for a field value that asks for something (not None, not an empty mapping)."""
    return bool(value) if isinstance(value, Mapping) else value is not None


@dataclass(frozen=True, init=False, repr=False)
class Resources:
    """A task's resource request.

    Every argument is optional; an unset field asks for nothing (the cluster's default).

    Parameters
    ----------
    cpu : int, float, str or (request, limit), optional
        Cores: ``2``, ``0.5``, ``"1.5"``, ``"500m"``, ``("2", "8")``; at most 10**6.
    memory : int, float, str or (request, limit), optional
        Bytes: ``"4Gi"``, ``"500M"``, ``100e9``, ``"64 GiB"``, ``("8Gi", "32Gi")``; from 1Mi to
        4Ei. A number without a unit is bytes, so ``memory=8`` is refused as a unit slip.
    gpu : int, str, GPU, TPU or Device, optional
        ``1``, ``"A100:2"``, ``"A100 80G:1"``, ``"L40s"``, ``GPU("A100", 1, "1g.5gb")``,
        ``TPU("V5P", "2x2x1")``, ``Device(2, "GPU", "custom_accelerator")``; ``0`` means none;
        at most 128 devices.
    disk : int, float, str or (request, limit), optional
        Ephemeral storage in bytes, as ``memory``.
    shm : int, str or "auto", optional
        Shared memory (``/dev/shm``) in bytes, as ``memory``, or ``"auto"``.
    extra : mapping of str to number, optional
        Dask abstract resources, taken as written: ``{"process": 1}``, ``{"MEMORY": 70e9}``;
        positive, at most 2**62; not one a field above already asks for (see the module).

    Attributes
    ----------
    cpu : Range[Fraction] or None
    memory, disk : Range[int] or None
    gpu : GPU, TPU, Device or None
    shm : int, "auto" or None
    extra : Mapping[str, float]
        Read-only, sorted by name; empty when unset.

    Raises
    ------
    SpecError
        For any malformed field, or an amount beyond any machine; the message names the
        field, the value and the accepted forms. For an ``extra`` resource a field asks for
        too, naming both.

    Examples
    --------
    >>> Resources(cpu="500m", memory=("8Gi", "32Gi"), gpu="a100:2")
    Resources(cpu=0.5, memory=('8Gi', '32Gi'), gpu='A100:2')
    """

    cpu: Range[Fraction] | None
    memory: Range[int] | None
    gpu: Accelerator | None
    disk: Range[int] | None
    shm: int | Literal["auto"] | None
    extra: Mapping[str, float]

    def __init__(
        self,
        cpu: Any = None,
        memory: Any = None,
        gpu: Any = None,
        disk: Any = None,
        shm: Any = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        object.__setattr__(self, "cpu", _range(cpu, "cpu"))
        object.__setattr__(self, "memory", _range(memory, "memory"))
        object.__setattr__(self, "gpu", parse_gpu(gpu))
        object.__setattr__(self, "disk", _range(disk, "disk"))
        object.__setattr__(self, "shm", _shm(shm))
        object.__setattr__(self, "extra", _extra(extra))
        self._check_said_once()

    def _check_said_once(self) -> None:
        """Refuse an ``extra`` resource that a field already asks for, naming both."""
        for name, amount in self.extra.items():
            field = _FIELD_OF.get(resource_key(name))
            value = None if field is None else getattr(self, field)
            if field is None or value is None or (field == "gpu" and not isinstance(value, GPU)):
                continue
            raise SpecError(
                f"{field}={self._literals()[field]} and extra {name}={amount!r} both ask for "
                f"Dask's {DASK_NAMES[field]!r} resource; ask for it once, as {field}= "
                f"(--{field} in %%task)"
            )

    def __hash__(self) -> int:
        fields = (self.cpu, self.memory, self.gpu, self.disk, self.shm)
        return hash((*fields, tuple(self.extra.items())))

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # The read-only ``extra`` view cannot be pickled; requests travel to Dask workers.
        return Resources.from_dict, (self.to_dict(),)

    def _spelled(self) -> dict[str, str | list[str] | dict[str, int | float]]:
        """Each set field in its canonical text (a range as a two-item list when not fixed)."""
        out: dict[str, Any] = {}
        for field, (_, spell) in _RANGED.items():
            value = getattr(self, field)
            if value is not None:
                ends = [spell(value.request), spell(value.limit)]
                out[field] = ends[0] if value.is_fixed else ends
        if self.gpu is not None:
            out["gpu"] = format_gpu(self.gpu)
        if self.shm is not None:
            out["shm"] = self.shm if self.shm == "auto" else format_quantity(self.shm)
        if self.extra:
            out["extra"] = dict(self.extra)
        return {field: out[field] for field in FIELDS if field in out}

    def _literals(self) -> dict[str, str]:
        """Each set field as the Python literal a person would type: ``{"memory": "'4Gi'"}``."""

        def literal(field: str, text: str) -> str:
            numeric = field == "cpu" or (
                field == "gpu" and isinstance(self.gpu, GPU) and self.gpu.device is None
            )
            return text if numeric else repr(text)

        shown = {}
        for field, text in self._spelled().items():
            if isinstance(text, list):
                shown[field] = f"({literal(field, text[0])}, {literal(field, text[1])})"
            elif isinstance(text, dict):
                shown[field] = repr(text)
            else:
                shown[field] = literal(field, text)
        return shown

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={text}" for name, text in self._literals().items())
        return f"Resources({fields})"

    def to_dict(self) -> dict[str, Any]:
        """Return the request as a JSON-safe dict of canonical strings.

        Returns
        -------
        dict
            Set fields only: ``{"cpu": "2", "memory": ["8Gi", "32Gi"], "gpu": "A100:2",
            "shm": "auto", "extra": {"process": 1}}``; a fixed range is one string.
        """
        return self._spelled()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Resources:
        """Build a request from :meth:`to_dict`'s output, or any mapping of field to value.

        Parameters
        ----------
        data : mapping
            Keys among ``cpu, memory, gpu, disk, shm, extra``; values in any accepted form
            (a list stands for a ``(request, limit)`` pair).

        Returns
        -------
        Resources

        Raises
        ------
        SpecError
            For unknown keys (named, with the nearest field) and malformed values.
        """
        if not isinstance(data, Mapping):
            raise SpecError(
                f"resources must be a mapping of {', '.join(FIELDS)}, got {shown(data)}"
            )
        unknown = [key for key in data if key not in FIELDS]
        if unknown:
            hint = did_you_mean(str(unknown[0]), FIELDS)
            raise SpecError(
                f"resources got unknown key(s) {', '.join(map(repr, unknown))}{hint} "
                f"(known: {', '.join(FIELDS)})"
            )
        return cls(**data)

    def override(self, other: Resources) -> Resources:
        """Return this request with every field that ``other`` sets replaced by ``other``'s.

        Fields are replaced whole and one by one: ``cpu`` in ``other`` replaces both the request
        and the limit of ``cpu`` here, and a non-empty ``extra`` replaces ``extra`` as a whole.

        Parameters
        ----------
        other : Resources
            The overriding request.

        Returns
        -------
        Resources

        Examples
        --------
        >>> Resources(cpu=2, memory="8Gi").override(Resources(memory="16Gi"))
        Resources(cpu=2, memory='16Gi')
        """
        if not isinstance(other, Resources):
            raise SpecError(f"override() takes a Resources, got {shown(other)}")
        mine = [field for field in FIELDS if is_set(getattr(self, field))]
        theirs = [field for field in FIELDS if is_set(getattr(other, field))]
        if not theirs or set(mine) <= set(theirs):  # one side wins whole: it is the answer
            return other if theirs else self
        merged = {field: getattr(other if field in theirs else self, field) for field in FIELDS}
        return Resources(**merged)

    def without(self, *fields: str) -> Resources:
        """Return this request with ``fields`` unset: what is left once some fields are
        computed elsewhere (an exported task's dynamic fields) or have no equivalent.

        Examples
        --------
        >>> Resources(cpu=2, memory="8Gi", extra={"process": 1}).without("cpu", "extra")
        Resources(memory='8Gi')
        """
        unknown = [f for f in fields if not isinstance(f, str) or f not in FIELDS]
        if unknown:
            raise SpecError(
                f"without() takes field names ({', '.join(FIELDS)}), got "
                f"{', '.join(map(shown, unknown))}"
            )
        return Resources(**{f: getattr(self, f) for f in FIELDS if f not in fields})

    def is_empty(self) -> bool:
        """Return True when no field is set."""
        return not any(is_set(getattr(self, field)) for field in FIELDS)

    def to_options(self) -> str:
        """Render the request as ``%%task`` options.

        Returns
        -------
        str
            ``--cpu 2 --memory 4Gi --gpu A100:2 --shm auto --resources process=1``; a range is
            ``REQUEST,LIMIT`` (``--cpu 2,8``); values with spaces are double-quoted
            (``--gpu "A100 80G:1"``). The ``%%task`` line parser
            (:mod:`taskcell.runner.task_line`) reads it back.
        """
        words = []
        for field, text in self._spelled().items():
            if isinstance(text, list):
                text = ",".join(text)
            elif isinstance(text, dict):
                text = ",".join(f"{k}={v!r}" for k, v in text.items())
            option = "resources" if field == "extra" else field
            value = f'"{text}"' if " " in text else text
            # "--resources=-x=1": a value that starts with "-" must not read as an option.
            words.append(f"--{option}={value}" if text.startswith("-") else f"--{option} {value}")
        return " ".join(words)
