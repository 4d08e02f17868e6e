"""How the instrument writes a figure for a person: durations, shares and changes.

One spelling per kind of figure, so the terminal, report.md and the charts
write the same number the same way. The report's renderers (report/) use
these, and so does the lease package, which words its recommendation itself
(lease/wording.py) and draws its chart. The report imports the lease package,
so a module inside report/ would make lease import report back: a cycle
between the two. Here, at the top of the instrument beside `progress` and
`options`, it sits below both. It imports nothing of the instrument, and the
layers contract in pyproject.toml keeps it that way (its lowest layer), so any
module may import it.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt_ms", "fmt_pct", "fmt_num", "fmt_change"]


def fmt_ms(ms: float | None) -> str:
    """A duration as a person writes it: 250 ms, 2.5 s, 1.5 min."""
    if ms is None or not math.isfinite(ms):
        return "-"
    if ms >= 60_000:
        return f"{ms / 60_000:.3g} min"
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    if ms >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.2g} ms"


def fmt_pct(p: float | None) -> str:
    """A share with the digits it needs: 12%, 1.5%, 0.012%."""
    if p is None or not math.isfinite(p):
        return "-"
    if p == 0:
        return "0%"
    pct = p * 100
    if pct >= 10:
        return f"{pct:.0f}%"
    if pct >= 1:
        return f"{pct:.1f}%"
    return f"{pct:.2g}%"


def fmt_num(value: Any, spec: str) -> str:
    """A table cell: the value in the format `spec`, or empty when there is none (None or NaN)."""
    return "" if value is None or value != value else format(value, spec)


def fmt_change(change: Any, decimals: int = 1, none: str = "") -> str:
    """A relative change, signed: +3.2%, -0.45%; `none` when there is none."""
    return none if change is None else f"{float(change) * 100:+.{decimals}f}%"
