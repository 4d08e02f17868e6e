"""`echomq-bench run`: the main job. On every build installed here (or each
--server), it answers four questions and opens its report with them:

1. Which build should I run? Every build loaded at once on one core, on
   fresh servers each trial in a drawn order, each ranked against one
   reference (redis7.0, the build Debian ships), allocator and all, until
   each trial interval is within ±1% (or 16 trials); each interval adds how
   far earlier runs on this machine differed (docs/design/compare.md). A
   version's effect within its allocator is a second line.
2. How long should my lease be? A sweep at a time scale of 10, which
   confirms a lease in seconds and can only overstate its false expiry
   (docs/design/lease-model.md).
3. What does the reaper's cap cost? One reap call's blocking time at
   caps 10, 100 and 1,000 beside a million live leases, and a mass crash's
   drain at the sweep's reap interval.
4. How does throughput grow with consumers, and which side is the bound?

Given one server, the last three are answered and the first says that a
choice needs two. A server reached by URL is someone's: each part removes
the keys it wrote, and the reaper's cap fills fewer live leases there.

Before them, the conformance check, each verb's server time and each
build's instructions per claim/complete cycle under callgrind (the work
alone, set beside each time ratio); after, the report and `results/latest`
pointing at it.

Each part writes its own folder inside the run folder, exactly as its own
command would, so `echomq-bench report` and the notebooks read them alike.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from echomq_bench.progress import Progress, ProgressFn, prefixed
from echomq_bench.records import meta, files as results
from echomq_bench.reapcost import QUICK, CurveSettings
from echomq_bench.lease.settings import SweepSettings
from echomq_bench.servers import ServerSpec

if TYPE_CHECKING:
    from echomq_bench.capacity.compare import Build, CompareResult
    from echomq_bench.conformance.stories import Line

__all__ = ["configure", "run", "Plan", "PLANS", "BASELINE_BUILD", "baseline_first", "build_comparison", "REAP_EVERY_MS",
           "reap_settings", "USERS_SERVER_MOST_LIVE"]

BASELINE_BUILD = "redis7.0"


@dataclass(frozen=True)
class Plan:
    """How long each part may take. Default fits 5 minutes here, quick 60 s, with six builds."""
    verb_rounds: int
    compare_s: float
    trials: int                  # the most trials; with precision, fewer once every interval is that tight
    precision: float | None      # None: exactly `trials`, too few to decide (quick)
    consumers: tuple[int, ...]
    consumers_s: float
    reap: CurveSettings
    lease_s: float
    lease_time_scale: float      # confirms a lease in seconds: docs/design/lease-model.md
    ceiling_requests: int
    count_calls: int = 100           # claims and completes counted per build under callgrind (counts.cycle)
    count_builds: int | None = None  # count only the first n builds, the reference first; None: every build
    consumers_builds: int | None = None   # consumers on the first n builds, the reference first; None: every build
    consumers_trials: int = 6             # rounds: every build at every count once per round (docs/design/consumers.md)
    consumers_warmup_s: float = 0.2       # before each window; one call in flight per connection settles at once


# The reaper's interval the lease sweep assumes; the reap part drains at it too.
REAP_EVERY_MS = SweepSettings().reap_every_ms
PLANS = {
    # Reap alone: promote's curve is the same shape (`echomq-bench reapcost` draws both).
    # Consumers: six rounds of 0.4 s windows on the reference and one more build (36 windows, 35 s
    # here beside other work) cost less than one 1 s window a point on six builds did (39 s), and
    # give each build's growth an interval (docs/design/consumers.md); 50 counted calls keep the
    # whole within 5 minutes with six builds.
    # 50 calls read up to 1% more per call than the gate's 100, alike on every build, so the count
    # ratios between builds move less (docs/design/count-gate.md).
    "default": Plan(verb_rounds=8, compare_s=2.5, trials=16, precision=0.01, consumers=(1, 4, 16),
                    consumers_s=0.4, consumers_builds=2, consumers_trials=6, count_calls=50,
                    reap=replace(QUICK, sizes=(1_000, 1_000_000), orphans=10_000, verbs=("reap",),
                                 cadences_ms=(int(REAP_EVERY_MS),)),
                    lease_s=12.0, lease_time_scale=10.0, ceiling_requests=100_000),
    # The minute-long form: enough to see every chart, too short to trust a ratio or a lease.
    "quick": Plan(verb_rounds=2, compare_s=1.0, trials=2, precision=None, consumers=(1, 8), consumers_s=0.25,
                  reap=CurveSettings(sizes=(1_000, 100_000), caps=(10, 100, 1_000), repeats=3, orphans=2_000,
                                     drain_size=10_000, verbs=("reap",), forms=("bare",),
                                     cadences_ms=(int(REAP_EVERY_MS),)),
                  lease_s=3.0, lease_time_scale=10.0, ceiling_requests=20_000,
                  count_calls=50, count_builds=2, consumers_builds=2, consumers_trials=2),
}


class Phases:
    """`[2/6] compare ...` lines on stderr, with the time each phase took."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.i, self.t0 = names, 0, time.monotonic()
        self.started = self.t0
        self.status = Progress()

    def next(self) -> None:
        now = time.monotonic()
        if self.i:
            self.status.end(f"      done in {now - self.started:.0f} s")
        self.started = now
        if self.i < len(self.names):
            self.status.end(f"[{self.i + 1}/{len(self.names)}] {self.names[self.i]}")
        self.i += 1

    def progress(self, text: str) -> None:
        self.status(f"      {text}")

    def end_line(self) -> None:
        self.status.done()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0].replace("\n", " ")
    from echomq_bench.options import add_out, add_quick

    add_quick(parser, "the 60-second form: every chart, but verdicts too short to trust")
    add_out(parser, "results/<utc-time>-run")


def _check(specs: list[ServerSpec], out: Path) -> bool:
    """The same check and record as `echomq-bench check --out`, told in one line per server."""
    from echomq_bench.conformance.check import keep, play, verdict
    from echomq_bench.servers import running

    def report(name: str, version: str, lines: list[Line] | None) -> None:
        if lines is not None:
            print(f"  {name}: {version}: {verdict(lines)}", file=sys.stderr)
            for line in lines:
                if not line.ok:
                    print(f"    {line}", file=sys.stderr)

    with running(*specs) as servers:
        ok, rows = play(servers, report)
        keep(out, servers, ok, rows)
    return ok


def _verbs(specs: list[ServerSpec], plan: Plan, out: Path, progress: ProgressFn) -> None:
    from echomq_bench.microbench.verbs import MATRIX_CASES, VERB_LABELS, matrix_settings, measure_builds
    from echomq_bench.records.kinds.verbs import VerbsRecord
    from echomq_bench.servers import running

    settings = matrix_settings(plan.verb_rounds)
    with running(*specs) as servers:
        builds, rows = measure_builds(servers, settings, progress)
        info = meta.collect(servers, part="verbs", rounds=settings.rounds, calls=settings.calls,
                            heavy_calls=settings.heavy_calls, sizes=vars(settings.sizes))
    summary = VerbsRecord(cases=tuple(MATRIX_CASES), labels=VERB_LABELS, builds=tuple(builds)).to_record()
    results.write_record(out, results.Record(kind="verbs", summary=summary, meta=info, tables={"microbench": rows}))


def _counts(specs: list[ServerSpec], plan: Plan, out: Path, progress: ProgressFn) -> None:
    """Each build's instructions per claim/complete cycle under callgrind, the reference build first: the
    report sets them beside the time ratios. Without valgrind, a record that says why none was counted."""
    from echomq_bench.counts.cycle import CycleCounts, count_cycles, cycle_record

    ordered = baseline_first(specs)[:plan.count_builds]
    # Only a single server started here from its binary can run under callgrind.
    found = count_cycles([s for s in ordered if s.kind == "embedded"], calls=plan.count_calls, progress=progress)
    elsewhere = [s.name for s in ordered if s.kind != "embedded"]
    if elsewhere:
        why = f"{', '.join(elsewhere)}: not a single server started here, so not run under callgrind"
        found = CycleCounts(found.runs, "; ".join(filter(None, (found.skipped, why))))
    info = meta.collect([], part="counts", calls=plan.count_calls, builds=[s.name for s in ordered],
                        builds_given=len(specs))
    results.write_record(out, cycle_record(found, info))


def baseline_first(specs: list[ServerSpec]) -> list[ServerSpec]:
    """The builds with the one every ratio is against first: redis7.0 when
    it is among them (or plain `redis`, the same binary), else the first."""
    for name in (BASELINE_BUILD, "redis"):
        for spec in specs:
            if spec.name == name:
                return [spec] + [s for s in specs if s is not spec]
    return list(specs)


def build_comparison(builds: list[Build], plan: Plan, progress: ProgressFn) -> CompareResult:
    """The main job's build comparison, as its measurement scripts repeat it: every build against
    the first (the reference), on the plan's trials."""
    from echomq_bench.capacity.compare import SHARED_CORE_PIPELINE, Judging, run_compare
    from echomq_bench.capacity.settings import CapacitySettings

    settings = CapacitySettings(duration_s=plan.compare_s, ceiling_requests=plan.ceiling_requests,
                                pipeline=SHARED_CORE_PIPELINE)
    return run_compare(builds, settings, trials=plan.trials, progress=progress,
                       judging=Judging(precision=plan.precision, pair_by="first"))


def _compare(specs: list[ServerSpec], plan: Plan, out: Path, progress: ProgressFn) -> None:
    from echomq_bench.capacity.compare import Build
    from echomq_bench.capacity.compare_files import write_compare

    result = build_comparison([Build(s) for s in baseline_first(specs)], plan, progress)
    write_compare(out, result, argv=sys.argv)


def _consumers(specs: list[ServerSpec], plan: Plan, out: Path, progress: ProgressFn) -> None:
    import random

    from echomq_bench.capacity.consumers import ConsumerTrials, run_consumer_trials
    from echomq_bench.records.kinds.consumers import ConsumersRecord, growth_entries
    from echomq_bench.servers import running

    # The load generator speaks plain TCP only: a server that wants TLS is
    # left out of this part with a line saying so, not the whole run with it.
    chosen = baseline_first(specs)[:plan.consumers_builds]
    plain = [s for s in chosen if not (s.url or "").startswith("rediss")]
    for spec in chosen:
        if spec not in plain:
            print(f"  {spec.name}: no consumers measured: the load generator speaks plain TCP, and this server wants "
                  "TLS (rediss://)", file=sys.stderr)
    if not plain:
        return
    how = ConsumerTrials(counts=tuple(plan.consumers), trials=plan.consumers_trials, window_s=plan.consumers_s,
                         warmup_s=plan.consumers_warmup_s)
    seed = random.SystemRandom().randrange(2 ** 31)
    with running(*plain) as servers:
        rows = run_consumer_trials(servers, how, seed, progress)
        info = meta.collect(servers, part="consumers", consumers=list(how.counts), trials=how.trials,
                            window_s=how.window_s, warmup_s=how.warmup_s, order_seed=seed, builds_given=len(specs))
    summary = ConsumersRecord(how.counts, trials=how.trials, window_s=how.window_s, warmup_s=how.warmup_s,
                              order_seed=seed, builds_given=len(specs),
                              growth=growth_entries(rows, [s.name for s in plain]))
    results.write_record(out, results.Record(kind="consumers", summary=summary.to_record(), meta=info,
                                             tables={"consumers": rows}))


# A server reached by URL is someone's own, their data in the memory this part
# fills: a million live leases with their job rows take hundreds of MB, more
# than a benchmark should ask of a server it did not start, and a reap's cost
# grows like log M, so a smaller M still answers the question. There the fill
# stops at the verbs part's own population, and the report says so.
USERS_SERVER_MOST_LIVE = 100_000


def reap_settings(specs: list[ServerSpec], plan: Plan) -> tuple[CurveSettings, str | None]:
    """The reap part's settings for these servers, and the note the report shows when they were capped."""
    sizes = tuple(sorted({min(m, USERS_SERVER_MOST_LIVE) for m in plan.reap.sizes}))
    if not any(s.url for s in specs) or sizes == tuple(plan.reap.sizes):
        return plan.reap, None
    return replace(plan.reap, sizes=sizes), (
        f"a server reached by URL is someone's own, so the main job fills it with at most "
        f"{USERS_SERVER_MOST_LIVE:,} live leases (its own servers get {max(plan.reap.sizes):,})")


def _reapcost(specs: list[ServerSpec], plan: Plan, out: Path) -> None:
    from echomq_bench.reapcost.run import run_reap_curve
    from echomq_bench.servers import running

    settings, note = reap_settings(specs, plan)
    with running(*specs) as servers:
        run_reap_curve(servers, settings=settings, out_dir=out, verbose=True, note=note)


def _lease(specs: list[ServerSpec], plan: Plan, out: Path, progress: ProgressFn) -> None:
    from echomq_bench.lease import quick_settings, run_sweep
    from echomq_bench.lease.report import recommend_for, write_run
    from echomq_bench.servers import running

    # One build is enough to size a lease: the work-time distribution, not
    # the server, decides it (the lease command compares builds when asked).
    settings = quick_settings(duration_s=plan.lease_s, time_scale=plan.lease_time_scale)
    with running(specs[0]) as (server,):
        res = run_sweep(server, settings, progress=prefixed(progress, f"{server.name}:"))
        info = meta.collect([server], lease=dict(work=settings.work, duration_s=settings.duration_s,
                                                 time_scale=settings.time_scale))
    write_run(out, [res], [recommend_for(res)], info, [None])


def _link_latest(run_dir: Path) -> Path:
    latest = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_dir.name)
    tmp.replace(latest)  # atomic: a reader never finds latest missing
    return latest


def run(args: argparse.Namespace) -> int:
    from echomq_bench.report import build_report
    from echomq_bench.servers import running

    plan = PLANS["quick" if args.quick else "default"]
    specs: list[ServerSpec] = list(args.server)
    # Every server must answer before anything is written: a run refused
    # leaves no half-made results folder behind.
    with running(*specs) as servers:
        for server in servers:
            server.version()
    run_dir = results.new_run_dir("run", args.out)
    base = baseline_first(specs)[0].name
    phases = Phases(["conformance check", "server µs per verb, build by build",
                     "instructions per claim/complete cycle under callgrind, build by build",
                     *([f"which build: all together on one core, each against {base}"]
                       if len(specs) > 1 else []),
                     "how long a lease: the sweep", "what the reaper's cap costs",
                     "throughput against consumers", "report"])
    print(f"echomq-bench run -> {run_dir}  ({'quick' if args.quick else 'default'}: "
          f"{', '.join(s.name for s in specs)})", file=sys.stderr)
    if len(specs) == 1:
        print(f"  one server given ({specs[0].name}): the lease, the reaper's cap and consumers; no build comparison, "
              "which needs two or more --server", file=sys.stderr)
    results.write_json(run_dir / "meta.json", meta.collect(argv=sys.argv, part="run", plan=plan.__dict__,
                                                           quick=bool(args.quick),
                                                           servers_requested=[s.describe() for s in specs]))
    checked = _parts(specs, plan, run_dir, phases)
    phases.next()
    report = build_report([run_dir], run_dir)
    phases.next()
    latest = _link_latest(run_dir)
    # meta.json went first, before the parts ran; the record adds the summary.
    results.write_record(run_dir, results.Record(kind="run", summary={
        "conformance_passed": checked, "answers": [{"question": a.question, "lines": list(a.lines)}
                                                   for a in report.answers],
        "elapsed_s": round(phases.elapsed, 1), "report": report.html.name}))
    print(report.text)
    print(f"\nReport: {report.html}\n        {report.md}\n        ({latest} -> {run_dir.name}; "
          f"{phases.elapsed:.0f} s)")
    if not checked:
        print("Conformance FAILED on at least one server: see check/check.csv", file=sys.stderr)
    return 0 if checked else 1


def _parts(specs: list[ServerSpec], plan: Plan, run_dir: Path, phases: Phases) -> bool:
    """Each part into its own folder, in the order the report asks its questions."""
    phases.next()
    checked = _check(specs, results.new_run_dir("check", run_dir / "check"))
    phases.next()
    _verbs(specs, plan, results.new_run_dir("verbs", run_dir / "verbs"), phases.progress)
    phases.end_line()
    phases.next()
    _counts(specs, plan, results.new_run_dir("counts", run_dir / "counts"), phases.progress)
    phases.end_line()
    if len(specs) > 1:  # with one, the report says a choice needs two (echomq_bench.report)
        phases.next()
        _compare(specs, plan, results.new_run_dir("compare", run_dir / "compare"), phases.progress)
        phases.end_line()
    phases.next()
    _lease(baseline_first(specs), plan, results.new_run_dir("lease", run_dir / "lease"), phases.progress)
    phases.end_line()
    phases.next()
    _reapcost(specs, plan, results.new_run_dir("reapcost", run_dir / "reapcost"))
    phases.next()
    _consumers(specs, plan, results.new_run_dir("consumers", run_dir / "consumers"), phases.progress)
    phases.end_line()
    return checked
