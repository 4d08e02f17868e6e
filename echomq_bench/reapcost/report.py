"""The reap/promote curve as text and as a chart."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from echomq_bench.measurement.serverstats import bound
from echomq_bench.reapcost.curve import FORM_LABELS, Curve, side_by_side

if TYPE_CHECKING:  # matplotlib is loaded only when a chart is drawn
    from matplotlib.typing import LineStyleType

__all__ = ["format_curve", "format_side_by_side", "chart"]


def format_curve(c: Curve) -> str:
    s = c.settings
    lines = [f"== {c.server}, {FORM_LABELS[c.form]}: {c.version} -- server µs of one call (median of {s.repeats}), "
             "by M live entries"]
    for verb in s.verbs:
        head = f"{verb:<8} {'cap':>6} {'k':>6} " + " ".join(f"{'M=' + _si(m):>9}" for m in s.sizes)
        lines += [head, "-" * len(head)]
        for cap in s.caps:
            for k in s.ks(cap):
                cells = []
                for m in s.sizes:
                    p = c.point(verb, m, cap, k)
                    cells.append(f"{p.median_us:>9.0f}" if p else f"{'-':>9}")
                lines.append(f"{'':<8} {cap:>6,} {k:>6,} " + " ".join(cells))
        ratio, paired, r0 = c.ratio(verb), c.paired_ratio(verb), c.ratio(verb, 0)
        fit = c.fit(verb)
        if ratio is not None:
            verdict = "ok" if ratio <= 2.0 else "OVER"
            pr = (f" (median of {len(c.ratio_pairs.get(verb, []))} side-by-side pairs; per pair "
                  f"{paired[0]:.2f}, IQR {paired[1]:.2f}..{paired[2]:.2f})" if paired else "")
            r0_text = f"{r0:.2f}x" if r0 is not None else "-"
            lines.append(f"{verb}: one call of {s.ratio_cap} at M={_si(max(s.sizes))} / at M={_si(min(s.sizes))}: "
                         f"{ratio:.2f}x{pr}; k=0: {r0_text} (grid medians); target <= 2x: {verdict} "
                         f"(a cost linear in M would give {max(s.sizes) / min(s.sizes):,.0f}x)")
        if fit:
            lines.append(f"{verb}: fit µs = {fit['base_us']:.1f} + {fit['us_per_job']:.2f}*moved + "
                         f"{fit['us_per_doubling_of_M']:.2f}*log2(M)")
        drains = [d for d in c.drains if d.verb == verb]
        if drains:
            lines.append(f"{verb}: drain of a mass crash, K={drains[0].orphans:,} at once beside "
                         f"M={_si(drains[0].size)}; one call per tick at each cadence")
            head = (f"{'cap':>8} {'calls':>6} {'µs/call':>8} {'max µs':>7} {'back-to-back':>12} "
                    + " ".join(f"{'@' + _ms(cd):>9}" for cd in s.cadences_ms))
            lines.append(head)
            for d in drains:
                call = c.call_us(verb, d.cap)
                lines.append(f"{d.cap:>8,} {d.calls:>6,} {call:>8.0f} {d.max_call_us:>7,} {d.wall_ms:>10.0f}ms "
                             + " ".join(f"{_dur(d.at_cadence_ms(cd, call)):>9}" for cd in s.cadences_ms))
    side = bound(c.server_main_cpu_s / c.wall_s if c.wall_s else 0, c.client_cpu_s / c.wall_s if c.wall_s else 0)
    lines.append(f"server main thread busy {c.server_main_cpu_s / c.wall_s:.0%}, client "
                 f"{c.client_cpu_s / c.wall_s:.0%} over {c.wall_s:.0f} s: {side}-bound (the client fills and "
                 "cleans between calls; the figures are the server's own clock)")
    return "\n".join(lines)


def format_side_by_side(bare: Curve, rows: Curve) -> str:
    """One full call (k = cap) in both forms, a line per verb, cap and M."""
    s = bare.settings
    lines = [f"== {bare.server}: {FORM_LABELS['bare']} against {FORM_LABELS['rows']} -- server µs of one call "
             f"that moves cap jobs (median of {s.repeats}); with job rows the keyspace held "
             f"{sum(s.sizes):,} rows, every M's"]
    head = f"{'verb':<8} {'cap':>6} {'M':>7} {'bare':>9} {'with job rows':>14} {'rows/bare':>10}"
    lines += [head, "-" * len(head)]
    for r in side_by_side(bare, rows):
        ratio = f"{r['rows_over_bare']:.2f}x" if r["rows_over_bare"] is not None else "-"
        lines.append(f"{r['verb']:<8} {r['cap']:>6,} {_si(r['M']):>7} {r['bare_us']:>9.0f} {r['rows_us']:>14.0f} "
                     f"{ratio:>10}")
    return "\n".join(lines)


def _si(n: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def _dur(ms: float) -> str:
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def _ms(ms: int) -> str:
    return f"{ms // 1000}s" if ms >= 1000 and ms % 1000 == 0 else f"{ms}ms"


def chart(curves: Sequence[Curve], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    verbs = curves[0].settings.verbs
    fig, axes = plt.subplots(len(verbs), 2, figsize=(15, 4.4 * len(verbs)), squeeze=False)
    styles: list[LineStyleType] = ["-", "--", ":", "-."]
    from matplotlib.lines import Line2D

    build_keys = [Line2D([], [], color="black", linestyle=styles[i % len(styles)],
                         label=f"{c.server}, {FORM_LABELS[c.form]} ({c.version})") for i, c in enumerate(curves)]
    for row, verb in enumerate(verbs):
        left, right = axes[row]
        for ci, c in enumerate(curves):
            s = c.settings
            first = ci == 0
            for mi, m in enumerate(s.sizes):
                xs = [cap for cap in s.caps if c.point(verb, m, cap, cap)]
                ys = [c.point(verb, m, cap, cap).median_us / 1000 for cap in xs]  # type: ignore[union-attr]
                left.plot(xs, ys, marker="o", linestyle=styles[ci % len(styles)], color=f"C{mi}",
                          label=f"M={_si(m)}" if first else None)
            for ki, cap in enumerate(s.caps):
                xs = [m for m in s.sizes if c.point(verb, m, cap, cap)]
                ys = [c.point(verb, m, cap, cap).median_us / 1000 for m in xs]  # type: ignore[union-attr]
                right.plot(xs, ys, marker="o", linestyle=styles[ci % len(styles)], color=f"C{ki}",
                           label=f"cap={cap:,}, k=cap" if first else None)
            empty = [m for m in s.sizes if c.point(verb, m, s.ratio_cap, 0)]
            right.plot(empty, [c.point(verb, m, s.ratio_cap, 0).median_us / 1000 for m in empty],  # type: ignore[union-attr]
                       marker="x", linestyle=styles[ci % len(styles)], color="grey",
                       label="k=0 (nothing due)" if first else None)
        left.set(xscale="log", yscale="log", xlabel="cap (k = cap expired)" if verb == "reap" else "cap (k = cap due)",
                 ylabel="server ms, one call", title=f"{verb}: one full call blocks the server for")
        right.set(xscale="log", yscale="log", xlabel="M (live entries in the set)", ylabel="server ms, one call",
                  title=f"{verb}: flat in M means log M, not M")
        for ax in (left, right):
            ax.grid(True, which="both", alpha=0.3)
            handles, _ = ax.get_legend_handles_labels()
            ax.legend(handles=handles + build_keys, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("echomq reap/promote cost: server time of one call (median), commandstats")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

