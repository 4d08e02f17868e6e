"""The audit of every job (load.audit.AuditReport) as the report shows it,
whichever record holds it: read as the typed entry
(records.kinds.faults.AuditEntry), its figures named once, and laid out by
one builder: a column per cluster (failover, reshard) or a row per scenario
(faults). A capacity run's audit is one line after its figures.

A record written before the audit held a figure shows it as unknown.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from echomq_bench.records.kinds.faults import AuditEntry

__all__ = ["Figure", "FIGURES", "COUNTS", "audit_of", "audit_table", "audit_line", "distinct"]

Figure = tuple[str, Callable[[AuditEntry], Any]]   # a figure's label, and its value in an audit (None: unknown)


def audit_of(raw: Mapping[str, Any] | None) -> AuditEntry:
    """The audit a record keeps as a plain mapping (AuditReport.to_dict()), typed."""
    return AuditEntry.from_record(raw or {})


def _known(value: Any) -> Any:
    return "?" if value is None else value


def _places(a: AuditEntry) -> str:
    """`600 = 590 + 10 + 0 + 0 + 0`, and the sum where it is not the jobs enqueued."""
    parts = [0 if v is None else v for v in (a.completed, a.pending, a.active, a.scheduled, a.dead)]
    total = sum(int(p) for p in parts)
    text = f"{_known(a.enqueued)} = " + " + ".join(map(str, parts))
    return text + ("" if total == a.enqueued else f" = {total}: MISMATCH")


# The audit whole, a row per figure.
FIGURES: tuple[Figure, ...] = (
    ("audit", lambda a: "PASS" if a.passed else "FAIL"),
    ("enqueued = completed + pending + active + scheduled + dead", _places),
    ("lost", lambda a: a.lost),
    ("in two places", lambda a: a.in_two_places),
    ("unknown ids on the server", lambda a: a.unknown),
    ("completes accepted twice", lambda a: a.double_accepted),
    ("zombie completes sent / accepted (must be 0)", lambda a: f"{_known(a.zombie_sent)} / "
                                                               f"{_known(a.zombie_accepted)}"),
    ("refused completes / with a token not superseded (must be 0)",
     lambda a: f"{_known(a.refused)} / {_known(a.refused_not_superseded)}"),
)

# Where the jobs went, a column per figure beside each scenario's verdict.
COUNTS: tuple[Figure, ...] = (
    ("enqueued", lambda a: a.enqueued), ("completed", lambda a: a.completed), ("lost", lambda a: a.lost),
    ("accepted twice", lambda a: a.double_accepted), ("in two places", lambda a: a.in_two_places),
)


def distinct(names: Sequence[str]) -> list[str]:
    """A column name per run: its own, numbered where two runs share one."""
    return [n if names.count(n) == 1 else f"{n} ({k + 1})" for k, n in enumerate(names)]


def audit_table(names: Sequence[str], audits: Sequence[AuditEntry | None], figures: Sequence[Figure] = FIGURES, *,
                heading: str | None = None, unknown: str = "?") -> pd.DataFrame:
    """Each run's audit: a row per figure and a column per run; with `heading`, a row per run, named in a
    column of that heading, and a column per figure. A figure the audit does not hold, and every figure of
    a run with no audit (a scenario skipped), reads `unknown`."""
    def value(a: AuditEntry | None, get: Callable[[AuditEntry], Any]) -> str:
        found = None if a is None else get(a)
        return unknown if found is None else str(found)

    if heading is not None:
        return pd.DataFrame([{heading: name, **{label: value(a, get) for label, get in figures}}
                             for name, a in zip(names, audits)])
    columns = distinct(names)
    return pd.DataFrame([{"figure": label, **{n: value(a, get) for n, a in zip(columns, audits)}}
                         for label, get in figures])


def audit_line(a: AuditEntry) -> str:
    """`1,234 enqueued = 1,230 completed + 4 pending + ...; lost 0, in two places 0, ...`: an audit in one line,
    a figure it does not hold as 0."""
    def n(value: int | None) -> str:
        return f"{int(value or 0):,}"

    return (f"{n(a.enqueued)} enqueued = {n(a.completed)} completed + {n(a.pending)} pending + {n(a.active)} active "
            f"+ {n(a.scheduled)} scheduled + {n(a.dead)} dead; lost {n(a.lost)}, in two places {n(a.in_two_places)}, "
            f"accepted twice {n(a.double_accepted)}, zombie completes accepted {n(a.zombie_accepted)}")
