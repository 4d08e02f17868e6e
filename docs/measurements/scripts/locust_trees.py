"""One Locust process, the scenario's own command, on two or more trees side by side.

    python docs/measurements/scripts/locust_trees.py --trees e59492b,HEAD [--rounds 5] [--seconds 15] [--users 20]

Each tree is checked out into a temporary git worktree and runs, in turn,

    locust -f scenarios/claim_complete.py --headless -u USERS -r USERS -t SECONDSs --csv ...

from its own checkout (PYTHONPATH set to it), against the embedded Redis the
scenario starts itself. Rounds interleave the trees in rotating order, so a
machine that changes speed during the run moves every tree alike. A tree's
figure is the cycles/s the run's own summary prints ("flow: N completed in
S s (R cycles/s ...)": completes accepted over the run, ramp-up and drain
included), and the audit's and, where the tree has one, the call-log
check's verdict ("history check" in trees before the rename). Results
folders and the results history of the trees that keep them go to a
temporary folder: nothing lands in results/.

The last lines give each tree's median and range, and each tree's geometric
mean ratio to the first tree's, round by round.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FLOW = re.compile(r"flow: (\d+) completed in ([\d.]+) s \((\d+) cycles/s")
VERDICT = re.compile(r"^(audit|history check|call-log check) (PASS|FAIL)", re.M)


def run_once(tree: Path, users: int, seconds: int, scratch: Path) -> tuple[int, str]:
    """One headless run of the scenario from `tree`: its cycles/s and its verdicts."""
    env = dict(os.environ, PYTHONPATH=str(tree), ECHOMQ_RESULTS_DIR=str(scratch / "results"),
               ECHOMQ_HISTORY="off")
    cmd = [str(Path(sys.executable).with_name("locust")), "-f", "scenarios/claim_complete.py", "--headless",
           "-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--csv", str(scratch / "run")]
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=seconds + 120)
    out = done.stdout + done.stderr
    flow = FLOW.search(out)
    if flow is None:
        raise SystemExit(f"{tree}: no flow line; exit {done.returncode}\n{out[-2000:]}")
    verdicts = ", ".join(f"{what} {word}" for what, word in VERDICT.findall(out))
    return int(flow.group(3)), verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", required=True, help="comma-separated revisions; the first is the reference")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--users", type=int, default=20)
    args = parser.parse_args()
    revs = args.trees.split(",")
    with tempfile.TemporaryDirectory(prefix="locust-trees-") as tmp:
        trees = {}
        for rev in revs:
            path = Path(tmp) / re.sub(r"[^A-Za-z0-9]", "_", rev)
            subprocess.run(["git", "worktree", "add", "--detach", "-q", str(path), rev], cwd=ROOT, check=True)
            trees[rev] = path
        try:
            rates = _rounds(trees, args, Path(tmp))
        finally:
            for path in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)
    _summary(revs, rates)


def _rounds(trees: dict[str, Path], args: argparse.Namespace, tmp: Path) -> dict[str, list[int]]:
    rates: dict[str, list[int]] = {rev: [] for rev in trees}
    order = list(trees)
    for r in range(args.rounds):
        for rev in order[r % len(order):] + order[:r % len(order)]:
            scratch = tmp / f"{r}-{len(rates[rev])}-{re.sub(r'[^A-Za-z0-9]', '_', rev)}"
            scratch.mkdir()
            rate, verdicts = run_once(trees[rev], args.users, args.seconds, scratch)
            rates[rev].append(rate)
            print(f"round {r + 1} {rev:>10}: {rate:>6} cycles/s  {verdicts}", flush=True)
    return rates


def _summary(revs: list[str], rates: dict[str, list[int]]) -> None:
    ref = rates[revs[0]]
    print(f"{'tree':>10}  {'median':>7}  {'range':>13}  ratio to {revs[0]} (geometric mean of rounds)")
    for rev in revs:
        xs = rates[rev]
        ratio = math.exp(statistics.fmean(math.log(x / y) for x, y in zip(xs, ref)))
        print(f"{rev:>10}  {statistics.median(xs):>7.0f}  {min(xs):>6}..{max(xs):<6}  {ratio:.2f}x")


if __name__ == "__main__":
    main()
