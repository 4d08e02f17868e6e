"""Which attempts fit the model's inputs, and which attempts it predicts.

The model's inputs (the claim-to-complete overheads, the crash gap, the
claim rate, the tick sizes) are measured, so a model fed the very attempts
it is compared with agrees partly by construction: a stall that made a
lease expire also sits in the overheads fed to the model.

The split is in time, halves of the counted window. The sweep runs each
lease once, over one window, every lease side by side: it has no
repetitions to divide. The attempts claimed in the first half fit the
inputs; the attempts claimed in the second half are what the model is
judged on. No attempt is in both, so a stall in the held-out half is not in
the fit; but both halves share the leases, the processes, the server and
the machine's state, so they are not two runs, and the label says so: "held
out within one run". A separate run is the test of the model on another
occasion: `lease --check` judges the sweep's model on its check run
(echomq_bench.lease.report.verification_text).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from echomq_bench.lease.records import LeaseData

__all__ = ["ModelSplit", "fit_part", "halves", "model_split", "part", "predicted_part"]

Span = tuple[float, float]


@dataclass(frozen=True)
class ModelSplit:
    """Where the model's inputs came from and what it predicted, by name."""

    fitted_on: str
    predicted: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.predicted or self.fitted_on in self.predicted:
            raise ValueError(f"a model split needs predicted runs apart from the fit run {self.fitted_on!r}, "
                             f"got {self.predicted!r}")

    @property
    def label(self) -> str:
        return (f"held out within one run: fitted on {self.fitted_on}, judged on {' and '.join(self.predicted)} "
                f"(the same processes, server and machine, not a separate run)")

    def to_dict(self) -> dict[str, Any]:
        return {"basis": "held_out_half", "fitted_on": self.fitted_on, "predicted": list(self.predicted),
                "label": self.label}


def halves(window: Span) -> tuple[Span, Span]:
    """The counted window's first half (fit) and second half (predicted), perf_counter seconds."""
    start, end = window
    mid = (start + end) / 2
    return (start, mid), (mid, end)


def model_split(server_name: str, duration_s: float) -> ModelSplit:
    """The two halves named by server and seconds into the window."""
    mid = duration_s / 2
    return ModelSplit(f"{server_name} window 0-{mid:g} s", (f"{server_name} window {mid:g}-{duration_s:g} s",))


def _rows(table: dict[str, np.ndarray], span: Span) -> dict[str, np.ndarray]:
    t0 = table["t0"]
    keep = (t0 >= span[0]) & (t0 < span[1]) if t0.size else np.zeros(0, dtype=bool)
    return {name: column[keep] if column.size else column for name, column in table.items()}


def part(d: LeaseData, span: Span) -> LeaseData:
    """The attempts claimed (claim sent) inside `span`, with `span` as the window, so
    everything read per window (claim rate, reap calls) is read over `span` too.
    `censored_live` stays the whole run's: an attempt still open has no row to place."""
    crashed = _rows(d.crashed, span)
    reclaim = crashed["reclaim"]
    return replace(d, window=span, live=_rows(d.live, span), crashed=crashed,
                   censored_crashed=int(np.isnan(reclaim).sum()) if reclaim.size else 0)


def fit_part(d: LeaseData) -> LeaseData:
    return part(d, halves(d.window)[0])


def predicted_part(d: LeaseData) -> LeaseData:
    return part(d, halves(d.window)[1])
