"""Where two figures of the same builds tell different stories, and what the
build matrix says under itself when they do. It reads typed records only.

Instructions against time. The matrix's time ratio is the main thread's
whole CPU per claim/complete cycle against the reference build's (compare).
The count ratio is the same cycle's instructions inside EVALSHA, counted
under callgrind (counts.cycle), against the same reference. Time mixes more
work with the same work run slower; a count is the work alone, and only the
script's: where the count ratio lies outside the time ratio's interval, the
difference is in how fast the work ran (memory, the allocator) or in what
the server does around the script (I/O, parsing), not in the script's work.

The verbs' time against the matrix's. The verbs table's figure is each
script's elapsed time inside EVALSHA on the server's own clock
(commandstats), one call at a time on a build alone; the matrix's is the
main thread's whole CPU per cycle with every build loaded at once on one
shared core, reading and parsing requests, writing replies and the
allocator's work included. Two builds may rank in opposite orders on the
two; the matrix's answers which build to run, since it is what the server
spends. The matrix ranks a pair only where their trials' ranges do not
overlap: medians of a few noisy trials rank nothing.
"""

from __future__ import annotations

from itertools import combinations

from echomq_bench.records.kinds.compare import CompareRecord, Spread
from echomq_bench.records.kinds.counts import CountsRecord
from echomq_bench.records.kinds.verbs import VerbsRecord

__all__ = ["SAME", "CYCLE_VERBS", "count_ratios", "count_notes", "verbs_per_cycle", "order_notes"]

SAME = 0.01    # count ratios this close to 1 are the same work: counts repeat within 0.4% on one binary
CYCLE_VERBS = ("claim", "complete")


def count_ratios(compare: CompareRecord, counts: CountsRecord) -> dict[str, tuple[float, str]]:
    """Each counted build's instructions per cycle over its reference's, and that reference: the build its time
    ratio is against, or with no compare the first build counted. Builds whose reference went uncounted: none."""
    cycles = counts.per_cycle()
    first = next(iter(cycles), None)
    out: dict[str, tuple[float, str]] = {}
    for name, n in cycles.items():
        ref = compare.base_of(name) if name in compare.builds else first
        if ref is not None and cycles.get(ref):
            out[name] = (n / cycles[ref], ref)
    return out


def _suggests(name: str, time: float, count: float) -> str:
    if abs(count - 1) <= SAME:
        return (f"same instructions, {'more' if time > 1 else 'less'} time: the difference is in memory or the "
                "allocator, or in the I/O and parsing around the script, not in the script's work")
    if time > count:
        return (f"more time than its instructions account for: each instruction costs more on {name} (memory, "
                "the allocator), or it spends more outside the script (I/O, parsing)")
    return (f"less time than its instructions account for: {name}'s instructions run faster (memory, the "
            "allocator), or it spends less outside the script (I/O, parsing)")


def count_notes(compare: CompareRecord, counts: CountsRecord) -> list[str]:
    """One note per build whose count ratio lies outside its time ratio's interval."""
    ratios = count_ratios(compare, counts)
    notes = []
    for name, entry in compare.builds.items():
        v = compare.headline_of(entry)
        if name not in ratios or not v.judged or not v.ci or v.ratio is None:
            continue
        count, ref = ratios[name]
        lo, hi = v.ci
        if lo <= count <= hi:
            continue
        notes.append(f"{name} runs {count:.3f}× {ref}'s instructions per cycle but takes {v.ratio:.2f}× its server "
                     f"time ({compare.level:.0%} CI {lo:.2f}–{hi:.2f}): {_suggests(name, v.ratio, count)}.")
    return notes


def verbs_per_cycle(verbs: VerbsRecord) -> dict[str, float]:
    """Each build's claim and complete server µs added up: the verbs table's time of one cycle."""
    return {b.build: sum(b.verbs[v].server_us for v in CYCLE_VERBS) for b in verbs.builds
            if all(v in b.verbs for v in CYCLE_VERBS)}


def _apart(a: Spread, b: Spread) -> bool:
    """Do two builds' trials not overlap: every one of one build's below every one of the other's?"""
    if a.min is None or a.max is None or b.min is None or b.max is None:
        return False
    return a.max < b.min or b.max < a.min


def order_notes(compare: CompareRecord, verbs: VerbsRecord) -> list[str]:
    """A note naming every pair of builds that the verbs' time and the matrix's time per cycle rank in opposite
    orders, each beyond the compare's equivalence margin and the matrix's trials apart; none when they agree."""
    inside = verbs_per_cycle(verbs)
    spreads = {name: e.server_us_per_cycle for name, e in compare.builds.items()
               if e.server_us_per_cycle.median is not None}
    whole = {name: float(s.median or 0) for name, s in spreads.items()}
    names = [n for n in compare.builds if n in inside and n in whole]
    margin = compare.margin
    pairs = []
    for a, b in combinations(names, 2):
        by_verbs, by_matrix = inside[a] / inside[b] - 1, whole[a] / whole[b] - 1
        if (abs(by_verbs) > margin and abs(by_matrix) > margin and _apart(spreads[a], spreads[b])
                and (by_verbs > 0) != (by_matrix > 0)):
            pairs.append(f"{a} against {b} (claim + complete {inside[a]:.1f} against {inside[b]:.1f} µs inside the "
                         f"scripts; {whole[a]:.1f} against {whole[b]:.1f} µs of main-thread CPU per cycle)")
    if not pairs:
        return []
    return [f"The verbs table and this matrix rank {'these builds' if len(pairs) > 1 else 'two builds'} in opposite "
            f"orders: {'; '.join(pairs)}. The verbs time only the script, elapsed, one call at a time on a build "
            "alone; the per-cycle figure is all the CPU the main thread spends on a cycle, I/O, parsing and the "
            "allocator included, with every build sharing one core. For which build to run, read the per-cycle "
            f"figure: it is what the server spends. (A pair within ±{margin:.0%} on either figure, or whose trials "
            "overlap, is not ranked.)"]
