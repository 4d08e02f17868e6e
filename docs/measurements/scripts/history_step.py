"""Does the results history flag a real step where it starts, and nowhere else? Gate runs around a slowed claim.

    python docs/measurements/scripts/history_step.py [--server SPEC]... [--before 8] [--after 8]
        [--slowdown 0.15 | --iterations N] [--rounds N] [--verbs VERB,...] [--keep DIR]

1. Calibrate a busy loop so that claim costs --slowdown more server time
   (gate_sensitivity.calibrate: measured A/B on the same server), or take
   --iterations as given.
2. Write a baseline once (`gate --quick --update` into a scratch folder,
   with the history off: it is not one of the runs).
3. Run `echomq-bench gate --quick` --before times on lua/, then --after
   times with ECHOMQ_LUA_DIR at a copy of lua/ whose claim carries the loop
   (`slowed_copy`). Each run is a fresh process, as CI runs it, recorded in
   a history of this script's own (ECHOMQ_HISTORY in the scratch folder).
4. Run `echomq-bench history` on that history and say whether the step in
   claim's figures is flagged at run --before + 1 for every build, and
   whether any other step is flagged anywhere.

The runs stand for commits this script cannot make: all run at the
checkout's one commit. Each run is labelled run-01, run-02, ... through
ECHOMQ_COMMIT_LABEL, which the run's meta.json records as `git.label`
beside the real commit; the history names a labelled run's revision by the
label. Nothing else treats the label as a commit. Run it on an otherwise
idle machine: it is a measurement.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from gate_sensitivity import calibrate  # this folder is on sys.path when the script runs

from echomq_bench.microbench.baseline import slowed_copy
from echomq_bench.records.history import HISTORY_ENV, read_history
from echomq_bench.records.meta import COMMIT_LABEL_ENV
from echomq_bench.report.history import all_series, flagged, select, step_line
from echomq_bench.servers import DEFAULT_SPECS, running

CLAIM_METRICS = ("gate.claim.server_us", "gate.claim.ratio")
FIGURES = ("gate.*.server_us", "gate.*.ratio")   # every verb's figures


def bench(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "echomq_bench", *args], env=env, capture_output=True, text=True)


def gate_args(opts: argparse.Namespace, baseline: Path, out: Path) -> list[str]:
    args = ["gate", "--count", "time", "--quick", "--baseline", str(baseline), "--out", str(out)]
    for spec in opts.server:
        args += ["--server", spec]
    if opts.rounds:
        args += ["--rounds", str(opts.rounds)]
    if opts.verbs:
        args += ["--verbs", opts.verbs]
    return args


def slowed_scripts(opts: argparse.Namespace, work: Path) -> tuple[Path, str]:
    """The slowed copy of lua/ and how it was made."""
    if opts.iterations:
        return slowed_copy(work / "lua-slow", "claim", opts.iterations), f"{opts.iterations} iterations (given)"
    with running(opts.server[0]) as (server,):
        folder, iterations, claim_us, measured = calibrate(server, opts.slowdown, work / "calibration")
    return folder, (f"{iterations} iterations: claim {claim_us:.1f} µs typical server time, "
                    f"{measured * 100:+.1f}% measured A/B")


def runs(opts: argparse.Namespace, work: Path, slow: Path) -> None:
    base_env = {**os.environ, HISTORY_ENV: "off"}
    done = bench(gate_args(opts, work / "baselines", work / "baseline-run") + ["--update"], base_env)
    if done.returncode != 0:
        raise SystemExit(f"the baseline run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    for n in range(1, opts.before + opts.after + 1):
        label = f"run-{n:02d}"
        env = {**os.environ, HISTORY_ENV: str(work / "history.sqlite"), COMMIT_LABEL_ENV: label}
        if n > opts.before:
            env["ECHOMQ_LUA_DIR"] = str(slow)
        done = bench(gate_args(opts, work / "baselines", work / label), env)
        if done.returncode not in (0, 1, 3):
            raise SystemExit(f"{label}: the gate failed to run (exit {done.returncode}):\n{done.stderr[-2000:]}")
        scripts = "claim slowed" if n > opts.before else "lua/"
        print(f"{label}  {scripts:<12} gate exit {done.returncode}", flush=True)


def judge(opts: argparse.Namespace, work: Path) -> bool:
    """The history as `echomq-bench history` prints it, then the verdict on
    it. Judged: each verb's figures; the gate's own counts of regressions
    step up with the slowed claim by design, so they are drawn, not judged."""
    db = work / "history.sqlite"
    shown = bench(["history", "--db", str(db), "--out", str(work / "page")], dict(os.environ))
    print(shown.stdout + shown.stderr)
    series = all_series(select(read_history(db), metrics=FIGURES))
    steps = flagged(series)
    want = f"run-{opts.before + 1:02d}"
    ok = True
    for metric in CLAIM_METRICS:
        for build in sorted({s.build for s in series}):
            hit = [s for s in steps if s.metric == metric and s.build == build and s.revision == want]
            print(f"{metric} on {build}: step at {want} {'FLAGGED' if hit else 'NOT flagged'}"
                  + (f" ({hit[0].change * 100:+.1f}%)" if hit and hit[0].change is not None else ""))
            ok &= bool(hit)
    elsewhere = [s for s in steps if not (s.metric in CLAIM_METRICS and s.revision == want)]
    print(f"other steps flagged in {len(series)} series of verbs' figures: {len(elsewhere)}")
    for s in elsewhere:
        print(f"  {step_line(s)}")
    return ok and not elsewhere


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", default=None)
    parser.add_argument("--before", type=int, default=8, help="gate runs on unchanged scripts")
    parser.add_argument("--after", type=int, default=8, help="gate runs with the slowed claim")
    parser.add_argument("--slowdown", type=float, default=0.15, help="claim's extra server time, calibrated")
    parser.add_argument("--iterations", type=int, default=None, help="the busy loop's size, not calibrated")
    parser.add_argument("--rounds", type=int, default=None, help="gate --rounds (default: the quick gate's)")
    parser.add_argument("--verbs", default=None, help="gate --verbs (default: all)")
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it (default: a temp folder)")
    opts = parser.parse_args()
    opts.server = opts.server or list(DEFAULT_SPECS)
    work = opts.keep or Path(tempfile.mkdtemp(prefix="echomq-history-step-"))
    work.mkdir(parents=True, exist_ok=True)
    slow, how = slowed_scripts(opts, work)
    print(f"slowed claim: {how}; scripts at {slow}\nwork: {work}")
    runs(opts, work, slow)
    ok = judge(opts, work)
    print(f"{'PASS' if ok else 'FAIL'}: the step {'is' if ok else 'is not'} flagged at run-{opts.before + 1:02d} "
          f"alone")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
