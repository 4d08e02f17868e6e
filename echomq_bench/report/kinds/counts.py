"""A `counts` record: each verb's instructions per call under callgrind
against the baseline of the same server binary, the part that grew where a
verb got costlier, a chart of where each verb's instructions go, the seed's
price (the project's enqueue, claim and complete against the seed's
scripts), and the verdict per build as the section's last lines. The main job's record counts
cycles and judges nothing: its section is each build's instructions per
cycle, which the build matrix sets beside the time ratios.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from echomq_bench.formatting import fmt_change
from echomq_bench.records.files import Run
from echomq_bench.records.kinds.counts import CountsBuild, CountsRecord, SeedPrice
from echomq_bench.report.context import context_lines
from echomq_bench.report.doc import Block, Heading, Image, Notes, Para, Table

__all__ = ["section", "verdict_line"]


def _verdict_table(b: CountsBuild) -> pd.DataFrame:
    rows = []
    for v in b.verdicts:
        grew = f"{v.grew} +{float(v.grew_by):,.0f}" if v.grew else ""
        grew += "".join(f", +{float(n):g} {k}" for k, n in (v.more_calls or {}).items())
        rows.append({"verb": v.verb, "baseline": "-" if v.base is None else f"{float(v.base):,.0f}",
                     "now": f"{float(v.now or 0):,.0f}", "change": fmt_change(v.change, 2),
                     "allowed": "" if v.allowed is None else f"+{float(v.allowed) * 100:.2f}%",
                     "again": fmt_change(v.again, 2), "grew most": grew, "verdict": v.status.split(" (")[0]})
    frame = pd.DataFrame(rows)
    # Columns only a flagged verb fills are left out when none was.
    return frame.drop(columns=[c for c in ("again", "grew most") if c in frame and not frame[c].astype(bool).any()])


def _changed_scripts(b: CountsBuild) -> str:
    changed = [v.verb for v in b.verdicts if v.script_changed]
    return (f"Scripts that differ from the baseline's, counted as they are now: {', '.join(changed)}."
            if changed else "Every script is the baseline's.")


def _figure_table(b: CountsBuild) -> pd.DataFrame:
    rows = []
    for verb, f in b.figures.items():
        commands = f.get("commands") or {}
        top = sorted(commands.items(), key=lambda kv: -float(kv[1]["instructions"]))[:3]
        lua = float(f["instructions"]) - sum(float(c["instructions"]) for c in commands.values())
        rows.append({"verb": verb, "instructions / call": f"{float(f['instructions']):,.0f}",
                     "Lua and glue": f"{lua / float(f['instructions']):.0%}",
                     "costliest commands": ", ".join(f"{k} {float(c['instructions']) / float(f['instructions']):.0%}"
                                                     for k, c in top)})
    return pd.DataFrame(rows)


def _seed_price_blocks(build: str, price: SeedPrice) -> list[Block]:
    """The project's instructions per call against the seed's, per verb, then the cycle's line."""
    if price.skipped is not None:
        return [Para(f"{build}: the seed's scripts went uncounted: {price.skipped}.")]
    frame = pd.DataFrame([{"verb": v.verb, "project / call": f"{v.project:,.0f}", "seed / call": f"{v.seed:,.0f}",
                           "ratio": f"{v.ratio:.2f}"} for v in price.verbs])
    cycle = (f"{' + '.join(price.cycle)}: {price.project or 0:,.0f} against {price.seed or 0:,.0f} "
             f"(ratio {price.ratio or 0:.2f})")
    return [Table(frame, f"{build}: the seed's price, instructions per call (judged against nothing)"), Para(cycle)]


def verdict_line(b: CountsBuild) -> str:
    if b.updated:
        return f"UPDATED: the count baseline of {b.build} written ({b.runs} fresh servers)"
    if b.regressions:
        return f"COSTLIER on {b.build}: {', '.join(b.regressions)}"
    return f"PASS on {b.build}: {len(b.verdicts)} verbs within their allowance"


def _origin(b: CountsBuild) -> str:
    binary, source = b.binary, b.baseline_from
    text = (f"{b.version or '?'}: {binary.get('path', '?')}, sha256 {str(binary.get('sha256', ''))[:12]}, "
            f"build id {str(binary.get('build_id', ''))[:12] or 'none'}, {binary.get('libc', '?')}; "
            f"{b.valgrind or '?'}.")
    if b.updated:
        return text + f" Baseline written: {b.baseline}."
    passes = source.passes if source.passes is not None else "?"
    return text + (f" Baseline {b.baseline}: {passes} fresh servers, "
                   f"{source.created_utc or '?'}, revision {source.revision or '?'}, recorded on "
                   f"{source.recorded_on or '?'} (a count baseline holds on any machine with this binary).")


def _cycle_section(record: CountsRecord, run: Run) -> list[Block]:
    verbs = record.cycle or ()
    cycles = record.per_cycle()
    rows = []
    for b in record.builds:
        lua = sum(float(b.figures[v]["instructions"]) - sum(float(c["instructions"]) for c in
                                                             (b.figures[v].get("commands") or {}).values())
                  for v in verbs if v in b.figures)
        rows.append({"build": b.build, "version": b.version or "?",
                     **{v: f"{float(b.figures[v]['instructions']):,.0f}" if v in b.figures else "-" for v in verbs},
                     "per cycle": f"{cycles[b.build]:,.0f}" if b.build in cycles else "-",
                     "Lua and glue": f"{lua / cycles[b.build]:.0%}" if cycles.get(b.build) else "-"})
    blocks: list[Block] = [
        Heading("Instructions per cycle", anchor="counts"),
        Para(f"Each build's {' and '.join(verbs)} per call, counted under callgrind inside EVALSHA on a fresh server "
             "with the count gate's machinery, judged against no baseline. A count is the work: the script and every "
             "command it calls, the same on any machine; it does not see reading and parsing the requests, writing "
             "the replies, the event loop, or how long memory and the allocator make each instruction take. The "
             "build matrix sets each build's count beside its time ratio.")]
    if rows:
        blocks.append(Table(pd.DataFrame(rows), "Instructions per call and per cycle", id="cycle-counts"))
    settings = record.builds[0].settings if record.builds else {}
    notes = [f"Per verb: {settings.get('calls', '?')} calls counted after {settings.get('warmup', '?')} uncounted, "
             f"on populations {settings.get('sizes', '?')}."] if record.builds else []
    given = (run.meta.get("settings") or {}).get("builds_given")
    if isinstance(given, int) and 0 < len(record.builds) < given and not record.skipped:
        notes.append(f"{len(record.builds)} of the {given} builds counted, the reference first (the quick form counts "
                     "the first two).")
    if record.skipped:
        notes.append(f"Not counted: {record.skipped}.")
    return blocks + [Notes(notes + context_lines(run))]


def section(run: Run, out: Path) -> list[Block]:
    record = CountsRecord.from_record(run.summary)
    if record.cycle:
        return _cycle_section(record, run)
    builds = record.builds
    blocks: list[Block] = [
        Heading("Instruction-count gate", anchor="counts"),
        Para("Each verb's instructions per call, counted under callgrind inside EVALSHA on a fresh server, "
             "against the baseline of the same server binary; a verb over its allowance (from the baseline's "
             "spread) is counted again on another fresh server and fails only if it is over again "
             "(echomq-bench gate --count instructions). Instructions miss memory, allocator and I/O effects: "
             "the timing gate covers those.")]
    for b in builds:
        blocks += [Heading(b.build, level=3), Para(_origin(b))]
        if b.verdicts:
            blocks.append(Table(_verdict_table(b), f"{b.build}: instructions per call against the baseline"))
            blocks.append(Para(_changed_scripts(b)))
        blocks.append(Table(_figure_table(b), f"{b.build}: where each verb's instructions go"))
        if b.seed_price is not None:
            blocks += _seed_price_blocks(b.build, b.seed_price)
    parts = run.tables.get("counts")
    if parts is not None and len(parts):
        from echomq_bench.report import charts

        png = charts.instruction_parts(parts, out / "counts_parts.png", footer=" ".join(context_lines(run)))
        blocks.append(Image(png, "Instructions per call by part: each server command a script called, and the "
                                 "Lua interpreter and scripting glue around them (the pumps per job moved)"))
    settings = builds[0].settings if builds else {}
    notes = [f"Per verb: {settings.get('calls', '?')} calls counted ({settings.get('heavy_calls', '?')} of the "
             f"pumps moving 100) after {settings.get('warmup', '?')} uncounted, on populations "
             f"{settings.get('sizes', '?')}; allowed: the one-sided 99.9% prediction bound of the baseline's runs, "
             "at least 0.5%; again: the confirming run's change."]
    if any(b.seed_price is not None for b in builds):
        notes.append("The seed's price: enqueue, claim and complete with the seed's scripts (echomq_bench/counts/seed: "
                     "its claim verbatim, a minimal fenced complete, a minimal enqueue), counted on one more fresh "
                     "server of the build from the same prepared states, populations, warm-up and calls; ratio: the "
                     "project's count over the seed's, what the queue's checks add to the same transition.")
    return blocks + [Notes(notes + context_lines(run)), *(Para(verdict_line(b)) for b in builds)]
