"""`echomq-bench faults --soak`: a short soak on one build injects exactly the
faults its seed schedules, a process and a network one at least, loses
nothing, accepts nothing twice, resolves every lost reply, passes its call-log
check per fault kind and draws its timeline."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from echomq_bench.faults.nemesis import counts, schedule
from tests.helpers import ROOT


def test_a_short_soak_injects_its_schedule_and_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    plan = schedule(7, 20.0)
    assert {f.family for f in plan} == {"process", "network"}
    done = subprocess.run([sys.executable, "-m", "echomq_bench", "faults", "--soak", "20s", "--seed", "7",
                           "--server", "redis", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("soak: seed 7 (replay with --seed 7), 20 s on each of redis; 3 faults each: ")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["passed"] is True and summary["scenarios"] == []
    [soak] = summary["soak"]
    assert soak["server"] == "redis" and soak["seed"] == 7
    assert soak["injected"] == soak["planned"] == counts(plan)
    assert [(f["kind"], f["planned_s"]) for f in soak["faults"]] == [(f.kind, f.at_s) for f in plan]
    assert soak["lost"] == 0 and soak["double_accepted"] == 0 and soak["jobs"] > 0
    assert soak["ambiguous_resolved"] == soak["ambiguous"] and soak["ambiguous_unresolved"] == 0
    assert sum(k["injected"] for k in soak["kinds"]) == len(plan)
    checked = soak["history"]  # the call-log check, under the key older records have
    found = checked["counts"]
    assert checked["ok"] is True and checked["jobs"] == sum(found[k] for k in (
        "ok", "recovered", "indeterminate", "refused")), found
    assert found["ok"] > 0 and found["lost"] == found["unexpected"] == found["duplicated"] == 0, found
    assert found["token_fell"] == found["stale_accepted"] == found["lease_overlap"] == 0, found
    assert set(checked["by_fault"]) <= {f.kind for f in plan} | {"none"} and len(checked["by_fault"]) > 1
    assert re.search(r"^call-log check +PASS$", done.stdout, re.M), done.stdout
    assert "Soak: the call-log check per fault kind" in done.stdout
    # What it prints is the record: the soak's table, a row per figure.
    for figure, value in (("lost", 0), ("accepted twice", 0), ("calls whose reply was lost", soak["ambiguous"]),
                          ("lost replies resolved", soak["ambiguous"]), ("lost replies unresolved", 0),
                          ("seed", "7 \\(replay with --seed 7\\)"), ("verdict", "PASS")):
        assert re.search(rf"^{figure} +{value}$", done.stdout, re.M), (figure, done.stdout)
    assert done.stdout.rstrip().splitlines()[-1].startswith("PASS: soak, seed 7, 1/1 builds passed")
    png = out / "soak-redis.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    for table in ("faults.csv", "soak_faults.csv", "soak_kinds.csv", "soak_timeline.csv", "meta.json"):
        assert (out / table).is_file(), table
    assert len((out / "soak_faults.csv").read_text().splitlines()) == 1 + len(plan)
