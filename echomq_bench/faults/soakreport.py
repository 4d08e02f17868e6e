"""A soak's results as the record's tidy tables, and its timeline chart
drawn from the record once it is written (what the terminal prints is the
record, through `echomq_bench.report.kinds.faults`).

Tables (one row per server in each):
    faults         the soak's totals in the scenarios' tidy shape (scenario "soak")
    soak_faults    every fault: kind, family, planned, start and end (s after the
                   load began), injected, recovery (s, empty when not recovered)
    soak_kinds     per kind: injected, recovered, recovery p50 and p99
    soak_timeline  completes accepted in each second since the load began
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from echomq_bench.faults.calllog_run import call_log_rows
from echomq_bench.records.kinds.faults import FaultsRecord, SoakEntry
from echomq_bench.records.record import Record

__all__ = ["soak_record", "soak_tables", "chart_name", "draw_timelines"]

_TOTALS = (("jobs", "jobs"), ("completed", "jobs"), ("lost", "jobs"), ("double_accepted", "jobs"),
           ("ambiguous", "calls"), ("ambiguous_resolved", "calls"), ("ambiguous_unresolved", "calls"),
           ("unanswered", "calls"), ("refused_expected", "calls"), ("refused_unexpected", "calls"))


def soak_tables(results: Sequence[SoakEntry]) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = {"faults": [], "soak_faults": [], "soak_kinds": [], "soak_timeline": []}
    for r in results:
        who = {"server": r.server, "build": r.build}
        totals = [(m, getattr(r, m), unit) for m, unit in _TOTALS]
        totals += [("faults", sum(r.injected.values()), "faults"), ("passed", int(r.passed), "bool"),
                   *call_log_rows(r.history)]
        tables["faults"] += [{**who, "scenario": "soak", "metric": m, "value": v, "unit": u} for m, v, u in totals]
        tables["soak_faults"] += [{**who, "seed": r.seed, **f.to_record()} for f in r.faults]
        tables["soak_kinds"] += [{**who, **k.to_record()} for k in r.kinds]
        tables["soak_timeline"] += [{**who, "t_s": t, "completes": n} for t, n in enumerate(r.timeline)]
    return tables


def soak_record(results: Sequence[SoakEntry], info: Mapping[str, Any]) -> Record:
    """The soaks as they are written: each build's totals, faults, checks and chart name in summary.json,
    and the tables above."""
    record = FaultsRecord(passed=all(r.passed for r in results), quick=False,
                          soak=tuple(replace(r, chart=chart_name(r.server)) for r in results))
    return Record(kind="faults", meta=info, tables=soak_tables(results), summary=record.to_record())


def chart_name(server: str) -> str:
    return f"soak-{server}.png"


FAMILY_COLOURS = {"process": "#d62728", "network": "#1f77b4"}
MIN_SHADE_S = 0.3  # an instant fault (a kill, a reset) still shows


def draw_timelines(summary: Mapping[str, Any], tables: Mapping[str, Sequence[Mapping[str, Any]]],
                   out: Path) -> list[Path]:
    """One PNG per soak in the record: completes per second, each fault's window
    shaded by family and labelled by kind. Drawn from the written record."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    paths = []
    for soak in FaultsRecord.from_record(summary).soak:
        server = soak.server
        points = sorted((row["t_s"], row["completes"]) for row in tables.get("soak_timeline", ())
                        if row["server"] == server)
        faults = [row for row in tables.get("soak_faults", ()) if row["server"] == server]
        fig, ax = plt.subplots(figsize=(max(8.0, min(24.0, len(points) / 25)), 4.0))
        ax.step([t for t, _ in points], [n for _, n in points], where="post", color="#333", linewidth=1)
        top = max([n for _, n in points] + [1])
        for f in faults:
            end = max(f["end_s"], f["start_s"] + MIN_SHADE_S)
            ax.axvspan(f["start_s"], end, color=FAMILY_COLOURS[f["family"]], alpha=0.25, linewidth=0)
            ax.text(f["start_s"], top * 1.02, f["kind"], rotation=90, fontsize=7, va="bottom", ha="left")
        ax.set_ylim(0, top * 1.35)
        ax.set_xlabel("seconds since the load began")
        ax.set_ylabel("completes accepted per second")
        ax.set_title(f"Soak on {server} ({soak.build or '?'}), seed {soak.seed}: "
                     f"lost {soak.lost}, double-accepted {soak.double_accepted}, "
                     f"lost replies unresolved {soak.ambiguous_unresolved}", fontsize=9)
        ax.legend(handles=[Patch(color=c, alpha=0.25, label=f"{fam} fault") for fam, c in FAMILY_COLOURS.items()],
                  loc="lower right", fontsize=7)
        ax.grid(True, alpha=0.3)
        path = out / chart_name(server)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths
