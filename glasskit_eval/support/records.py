"""Base classes for the value classes on the start-up path.

``@dataclass`` compiles an ``__init__``, ``__repr__``, ``__eq__`` and, when frozen,
``__setattr__``/``__delattr__``/``__hash__`` for every class at import time: about
half a millisecond each, a large share of ``validate``'s own start-up. Classes
deriving from these write their ``__init__`` by hand (cached as bytecode like any
other code) and list their fields in ``_fields``; everything else behaves as the
dataclass did: field-wise equality within one class, repr in field order and, for
:class:`Frozen`, assignment raising ``dataclasses.FrozenInstanceError``.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import ClassVar

__all__ = ["Frozen", "Record"]


class Record:
    """A mutable record: ``@dataclass`` semantics (eq by fields, so unhashable)."""

    __slots__ = ()
    #: Field names in declaration order; drive ``__eq__`` and ``__repr__``.
    _fields: ClassVar[tuple[str, ...]] = ()
    #: Fields left out of ``__repr__`` (``field(repr=False)``).
    _hidden: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    # Defining __eq__ sets __hash__ to None, as @dataclass does for mutable classes.

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields
                          if name not in self._hidden)
        return f"{type(self).__qualname__}({shown})"


class Frozen(Record):
    """An immutable, hashable record: ``@dataclass(frozen=True)`` semantics.

    ``__init__`` stores fields through ``self.__dict__``, as assignment raises.
    """

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
