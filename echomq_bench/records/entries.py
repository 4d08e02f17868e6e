"""The steps every typed record shares: a frozen dataclass whose fields are
its summary keys, written out as summary.json holds it and read back.

A field's name is its key. A nested entry names its type in the field's
metadata: `one(T)` for an entry, `many(T)` for a list of entries,
`by_name(T)` for entries by name (a build, a node). `optional()` marks a
key written only when it has a value (`one(T, written_when_none=False)` an
entry). Reading takes the keys the type
knows and leaves a key the record lacks at the field's default: a record
of an older schema reads, with what it did not hold left empty, and a
renderer says "?" for it.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, field, fields
from typing import Any, Mapping, TypeVar

from echomq_bench.records.record import ResultsError

__all__ = ["Entry", "one", "many", "by_name", "optional", "plain"]

E = TypeVar("E", bound="Entry")


def one(of: type[Entry], default: Any = None, *, written_when_none: bool = True) -> Any:
    return field(default=default, metadata={"of": of, "shape": "one", "optional": not written_when_none})


def many(of: type[Entry], *, written_when_empty: bool = True) -> Any:
    return field(default=(), metadata={"of": of, "shape": "many", "omit_empty": not written_when_empty})


def by_name(of: type[Entry], *, written_when_empty: bool = True) -> Any:
    return field(default_factory=dict, metadata={"of": of, "shape": "by_name", "omit_empty": not written_when_empty})


def optional(default: Any = None) -> Any:
    """A key written only when its value is not None."""
    return field(default=default, metadata={"optional": True})


def plain(value: Any) -> Any:
    """An entry, a tuple or a read-only mapping as the dicts and lists JSON writes."""
    if isinstance(value, Entry):
        return value.to_record()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _read(f: Field[Any], value: Any) -> Any:
    of, shape = f.metadata.get("of"), f.metadata.get("shape")
    if of is None:
        return tuple(value) if isinstance(value, list) else value
    if shape == "one":
        return of.from_record(value) if isinstance(value, Mapping) else f.default
    if shape == "many":
        return tuple(of.from_record(v) for v in value or () if isinstance(v, Mapping))
    return {str(k): of.from_record(v) for k, v in (value or {}).items() if isinstance(v, Mapping)}


class Entry:
    """A typed summary entry. Subclasses are frozen dataclasses."""

    def to_record(self) -> dict[str, Any]:
        """The entry as summary.json holds it, keys in the fields' order."""
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if (value is None and f.metadata.get("optional")) or (not value and f.metadata.get("omit_empty")):
                continue
            out[f.name] = plain(value)
        return out

    @classmethod
    def from_record(cls: type[E], entry: Mapping[str, Any]) -> E:
        """The entry summary.json holds, typed; keys it does not know are left out."""
        known = {f.name: _read(f, entry[f.name]) for f in fields(cls) if f.name in entry}  # type: ignore[arg-type]
        missing = [f.name for f in fields(cls)  # type: ignore[arg-type]
                   if f.name not in known and f.default is MISSING and f.default_factory is MISSING]
        if missing:  # keys every writer writes: a record without them is not of this kind
            raise ResultsError(f"a {cls.__name__} needs {', '.join(map(repr, missing))}; the record has none")
        return cls(**known)
