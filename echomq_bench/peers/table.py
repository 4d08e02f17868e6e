"""The peers run as the terminal shows it: the figures with their intervals and
the settings beside each row, then every queue's ratio to the baseline."""

from __future__ import annotations

from typing import Any

__all__ = ["format_table"]


def _ci(c: dict[str, Any], digits: int = 1) -> str:
    if c["ci"] is None:
        return "-"
    lo, hi = c["ci"]
    return f"{lo:.{digits}f}..{hi:.{digits}f}"


def _ratio(v: dict[str, Any] | None) -> str:
    if v is None:
        return "-"
    ci = "" if v["ci"] is None else f" [{v['ci'][0]:.2f}, {v['ci'][1]:.2f}]"
    return f"{v['ratio']:.2f}{ci} {v['text']}"


def _rows(summary: dict[str, Any]) -> list[str]:
    head = (f"{'server':<14} {'queue':<12} {'mode':<10} {'jobs/s':>8} {'srv µs/job':>10} {'95% CI':>13} "
            f"{'script µs':>9} {'cmds/job':>8} {'trips/job':>9} {'B/pending':>9} {'cli µs/job':>10} "
            f"{'clean':>5}  settings")
    lines = [head]
    for e in summary["queues"]:
        ci = e["ci"]
        lines.append(
            f"{e['server_version']:<14} {e['queue']:<12} {e['mode']:<10} {ci['jobs_per_s']['mean'] or 0:>8,.0f} "
            f"{ci['server_us_per_job']['mean'] or 0:>10.1f} {_ci(ci['server_us_per_job']):>13} "
            f"{e['script_us_per_job']:>9.1f} {e['commands_per_job']:>8.1f} {e['round_trips_per_job']:>9.2f} "
            f"{e['bytes_per_pending_job']:>9,.0f} {e['client_us_per_job']:>10.0f} "
            f"{'yes' if e['drained_clean'] else 'NO':>5}  {e['drain_mode']}")
    return lines


def _ratio_rows(summary: dict[str, Any]) -> list[str]:
    base = summary["baseline"]
    lines = [f"ratio to {base} in the same mode on the same server (trial-paired; geometric mean [95% CI] verdict):",
             f"{'server':<14} {'queue':<12} {'mode':<10} {'server µs/job':<44} {'jobs/s':<44}"]
    for e in summary["queues"]:
        if e["queue"] == base:
            continue
        vs = e["vs_baseline"]
        if not vs:
            lines.append(f"{e['server_version']:<14} {e['queue']:<12} {e['mode']:<10} no {base} run to compare with")
            continue
        lines.append(f"{e['server_version']:<14} {e['queue']:<12} {e['mode']:<10} "
                     f"{_ratio(vs.get('server_us_per_job')):<44} {_ratio(vs.get('jobs_per_s')):<44}")
    return lines


def format_table(summary: dict[str, Any]) -> str:
    lines = [f"peers: {summary['jobs']:,} jobs, {summary['consumers']} consumers, {summary['trials']} trial(s); "
             "figures per job, geometric means over trials; µs are server main-thread CPU"]
    lines += _rows(summary)
    lines.append("")
    lines += _ratio_rows(summary)
    lines.append("")
    seen = set()
    for e in summary["queues"]:
        if e["queue"] in seen:
            continue
        seen.add(e["queue"])
        lines.append(f"{e['queue']} ({e['library']}): enqueue {e['enqueue_mode']}")
    for name, why in summary["skipped"].items():
        lines.append(f"skipped {name}: {why}")
    for f in summary["failures"]:
        lines.append(f"FAILED {f['server']} {f['queue']} ({f.get('mode', 'default')}) trial {f['trial']}: "
                     f"{f['error'].splitlines()[0]}")
    return "\n".join(lines)
