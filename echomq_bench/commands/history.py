"""`echomq-bench history`: every recorded run's headline figures across
commits, one line per machine fingerprint, with step changes flagged.

Each command that measures adds its run to the results history when it
writes its folder (echomq_bench.records.history); `--reindex DIR...` adds
folders written before, or elsewhere, and adding a folder twice changes
nothing. Without --reindex it reads the history, fits each series (metric
x build x fingerprint) with asv's step detection (echomq_bench.measurement.steps),
judges each flagged step allowing for runs close in time drifting together
(echomq_bench.measurement.stepverdict), writes a PNG per metric,
history.md and history.html, and prints the steps called, then the
inconclusive ones: metric, build, fingerprint, the revision the step
starts at, its size, the levels before and after, and its n and interval.
It reads; it never measures.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    from echomq_bench.measurement.steps import DEFAULT_THRESHOLD
    from echomq_bench.options import add_list, choice, fraction
    from echomq_bench.records.record import KINDS

    parser.add_argument("--reindex", nargs="*", type=Path, default=None, metavar="DIR",
                        help="add every results folder in or below each DIR (default: results) to the history, "
                             "replacing what it held of them, then stop")
    parser.add_argument("--db", type=Path, default=None, metavar="FILE",
                        help="the history file (default: $ECHOMQ_HISTORY, else results/history.sqlite)")
    add_list(parser, "--kind", choice(KINDS, "kind"), metavar="KIND",
             help=f"only runs of these kinds ({', '.join(KINDS)})")
    add_list(parser, "--metric", str, metavar="METRIC",
             help="only these metrics, by name or shell pattern (gate.claim.*)")
    add_list(parser, "--build", str, metavar="BUILD", help="only these builds")
    parser.add_argument("--threshold", type=fraction, default=DEFAULT_THRESHOLD, metavar="FRACTION",
                        help=f"flag steps larger than this share of the level before them, 0.05 or 5%% "
                             f"(default {DEFAULT_THRESHOLD})")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="where to write the charts and history.md/.html (default: results/history)")


def _reindex(args: argparse.Namespace) -> int:
    from echomq_bench.records.history import history_path, reindex
    from echomq_bench.records.record import RESULTS_DIR

    dirs = args.reindex or [RESULTS_DIR]
    done = reindex(dirs, args.db)
    print(f"history: {args.db or history_path()}: {done.runs} runs indexed, {done.rows} figures, from "
          f"{', '.join(map(str, dirs))}")
    for why in done.skipped:
        print(f"  skipped: {why}")
    return 0


def run(args: argparse.Namespace) -> int:
    import sys

    if args.reindex is not None:
        drawing = [flag for flag, given in (("--kind", args.kind), ("--metric", args.metric), ("--build", args.build),
                                            ("--out", args.out)) if given]
        if drawing:  # they would be ignored: say so rather than index and draw nothing
            print(f"echomq-bench history: error: --reindex only indexes; drop {', '.join(drawing)} (or run again "
                  "without --reindex to draw)", file=sys.stderr)
            return 2
        return _reindex(args)
    from echomq_bench.records.history import HISTORY_ENV, history_path, read_history
    from echomq_bench.records.record import RESULTS_DIR
    from echomq_bench.report.history import all_series, select, summary_text
    from echomq_bench.report.history_page import draw_metric, write_page

    where = args.db or history_path()
    if where is None:
        print(f"echomq-bench history: error: the history is off (${HISTORY_ENV}=off); name a file with --db",
              file=sys.stderr)
        return 2
    frame = select(read_history(where), args.kind or (), args.metric or (), args.build or (), where)
    series = all_series(frame, args.threshold)
    out = args.out or RESULTS_DIR / "history"
    out.mkdir(parents=True, exist_ok=True)
    charts = {metric: draw_metric(metric, [s for s in series if s.metric == metric], frame, out)
              for metric in dict.fromkeys(s.metric for s in series)}
    text = summary_text(frame, series, args.threshold, where)
    md, page = write_page(frame, series, charts, text, out)
    print(text)
    print(f"charts: {len(charts)} PNG in {out}")
    print(f"page: {page}\n      {md}")
    return 0
