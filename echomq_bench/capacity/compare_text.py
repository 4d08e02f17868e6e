"""A comparison as text for people: a row per build, then each verdict with its n, method and interval."""

from __future__ import annotations

from echomq_bench.capacity.compare_result import CLOSED_LOOP_P99, HEADLINE, METRICS, CompareResult, median
from echomq_bench.measurement.verdicts import METHOD, MIN_TRIALS
from echomq_bench.records.meta import build_lines

__all__ = ["table", "verdict_lines", "allocator_note"]


def table(result: CompareResult) -> str:
    lines = [f"{'build':<14} {'version':<14} {'allocator':<14} {'cycles/s median':>15} {'(min..max)':>17} "
             f"{'srv µs/cyc':>10} {'p99 ms':>7} {'busy+wait':>9} {'server-bound':>12}"]
    for b in result.builds:
        runs, thr = result.of(b.name), result.values(b.name, "throughput")
        s = sorted(thr)
        busy = median([r.server_utilization + (r.server_wait or 0.0) for r in runs])
        bounds = f"{sum(r.bound == 'server' for r in runs)}/{len(runs)}"
        lines.append(
            f"{b.name[:14]:<14} {runs[0].version[:14]:<14} {str(runs[0].server.get('allocator', '?'))[:14]:<14} "
            f"{median(thr):>15,.0f} "
            f"{f'({s[0]:,.0f}..{s[-1]:,.0f})':>17} {median(result.values(b.name, 'server_us')):>10.2f} "
            f"{median(result.values(b.name, 'p99')):>7.2f} {busy * 100:>8.1f}% {bounds:>12}")
    if result.interleave == "together":
        lines.append(f"(together: the {len(result.builds)} builds shared one core, so cycles/s and busy % are "
                     "each one's share; server µs/cycle is what compares)")
    lines += build_lines((b.name, result.of(b.name)[0].server) for b in result.builds)
    lines += allocator_note({b.name: str(result.of(b.name)[0].server.get("allocator", "?")) for b in result.builds})
    return "\n".join(lines + verdict_lines(result))


def allocator_note(allocators: dict[str, str]) -> list[str]:
    """A line when the builds link different allocators: a ratio between them is the build's and the
    allocator's at once."""
    if len(set(allocators.values())) < 2:
        return []
    shown = ", ".join(f"{name} {allocator}" for name, allocator in allocators.items())
    return [f"allocators differ ({shown}): a difference between these builds is their allocators' too"]


def verdict_lines(result: CompareResult) -> list[str]:
    """The verdicts, headline first; the trials left out and why; the method."""
    base = result.baseline
    out = []
    for b in result.builds[1:]:
        for metric in (HEADLINE, *[m for m in METRICS if m != HEADLINE]):
            v = result.verdict(b.name, metric)
            label = METRICS[metric][2]
            out.append(f"{label}, {b.name} against {base}: " + (v.label() if v is not None else CLOSED_LOOP_P99))
        saturated = result.saturated(b.name)
        if not all(saturated):
            left = [str(i + 1) for i, ok in enumerate(saturated) if not ok]
            out.append(f"excluded for {b.name}: trial {', '.join(left)} of {len(saturated)}, where a build was not "
                       "server-bound (busy + wait below 97% of the window)")
    out.append(f"method: {METHOD}; at least {MIN_TRIALS} counted trials for a verdict; "
               f"equivalence margin ±{result.margin:.0%}")
    return out
