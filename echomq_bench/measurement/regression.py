"""A verb against its baseline: the rule both gates judge by.

Each gate measures a verb's change against the baseline (now / base - 1)
and holds an allowance: the largest change the baseline's own spread
explains. A verb is flagged when a change that counts exceeds its
allowance. A flagged verb is measured once more, and a regression is a
verb flagged twice, or one the baseline has no figure for. The status
words run from worst to best: missing, regressed, inconclusive, flagged
once only, a qualified ok, better, ok.

The timing gate's verdict (records.kinds.gate.GateVerdictEntry) judges
server time over a reference script's, and adds a script A/B, an advisory
cross-run figure and noise that can leave a verb inconclusive; the count
gate's (records.kinds.counts.CountVerdictEntry) judges instructions per call
and names what grew. Each is its record's entry: it holds its own figures
and evidence, and is written as the record keeps it; the rule is here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Mapping, Self, Sequence

__all__ = ["RegressionVerdict", "AllowedChange", "MISSING", "NOT_CONFIRMED", "TOO_NOISY"]

MISSING = "MISSING from the baseline"
NOT_CONFIRMED = "ok (not confirmed)"
TOO_NOISY = "inconclusive (noise above tolerance)"

AllowedChange = tuple[float | None, float | None]   # a change and its allowance; None: nothing to compare


def _over(check: AllowedChange) -> bool:
    change, allowed = check
    return change is not None and allowed is not None and change > allowed


def _under(check: AllowedChange) -> bool:
    change, allowed = check
    return change is not None and allowed is not None and change < -allowed


@dataclass(frozen=True, kw_only=True)
class RegressionVerdict:
    """One verb against its baseline; a gate's subclass adds its figures, its evidence and its words. The
    record keeps these fields first, then the subclass's, then the status as said."""

    change: float | None = None    # now / base - 1; None: no baseline figure to compare
    allowed: float | None = None   # the largest change the baseline's spread explains
    confirmed: bool | None = None  # flagged again when measured once more; None: not measured again
    missing: bool = False          # the baseline has no figure for this verb

    WORSE: ClassVar[str] = "WORSE"    # the status word of a regression
    BETTER: ClassVar[str] = "better"  # ... of a change beyond the allowance the other way
    DIGITS: ClassVar[int] = 4         # a float's digits as the record holds it

    def __post_init__(self) -> None:
        # The figures held at the record's digits: the status said when the gate ran is the one
        # a reader of the record works out again.
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float):
                object.__setattr__(self, f.name, round(value, self.DIGITS))

    def checks(self) -> Sequence[AllowedChange]:
        """The changes that count, each with its allowance."""
        return ((self.change, self.allowed),)

    @property
    def flagged(self) -> bool:
        return any(_over(c) for c in self.checks())

    @property
    def better(self) -> bool:
        return any(_under(c) for c in self.checks())

    @property
    def regressed(self) -> bool:
        return self.missing or (self.flagged and self.confirmed is not False)

    @property
    def inconclusive(self) -> bool:
        """A check too noisy to pass or fail; a gate whose figures cannot be is never inconclusive."""
        return False

    @property
    def note(self) -> str:
        """Why an ok is qualified (for example a figure shown, not judged); empty when it is not."""
        return ""

    @property
    def status(self) -> str:
        """The verdict as the gate prints it."""
        if self.missing:
            return MISSING
        if self.regressed:
            return self.WORSE
        if self.inconclusive:
            return TOO_NOISY
        if self.flagged:
            return NOT_CONFIRMED
        if self.note:
            return f"ok ({self.note})"
        if self.better:
            return self.BETTER
        return "ok"

    def confirm(self, again: Self) -> Self:
        """This verdict after the verb was measured once more: a flag stands only if raised again."""
        return replace(self, confirmed=again.flagged) if self.flagged else self

    def to_record(self) -> dict[str, Any]:
        """Every field as the record holds it, and the status as said."""
        out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in vars(self).items()}
        out["status"] = self.status
        return out
