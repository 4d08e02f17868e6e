"""The context line every chart and table carries: builds and versions,
machine, commit, trials and spread, and which side was the bottleneck."""

from __future__ import annotations

from typing import Any, Iterable

from echomq_bench.records.files import Run

__all__ = ["builds", "machine", "commit", "context_lines"]


def builds(run: Run) -> str:
    servers = run.meta.get("servers") or []
    parts = []
    for s in servers:
        settings = s.get("settings") or {}
        extra = ", io-threads " + settings["io-threads"] if settings.get("io-threads", "1") not in ("1", "") else ""
        malloc = f", malloc {s['allocator']}" if s.get("allocator") else ""
        parts.append(f"{s.get('name', '?')} = {s.get('version', '?')}{malloc}{extra}")
    return "; ".join(parts) or "servers not recorded"


def machine(run: Run) -> str:
    m = run.meta.get("machine") or {}
    return f"{m.get('cpu_model', '?')} x {m.get('cpu_count', '?')} cores"


def commit(run: Run) -> str:
    git = run.meta.get("git") or {}
    sha = (git.get("commit") or "unknown")[:10]
    return sha + (" (uncommitted changes)" if git.get("dirty") else "")


def context_lines(run: Run, *, trials: str = "", bottleneck: str = "", extra: Iterable[str] = ()) -> list[str]:
    lines = [f"Servers: {builds(run)}. Machine: {machine(run)}, server and load generator sharing it. "
             f"Commit {commit(run)}. Run {run.run_id}, {run.meta.get('created_utc', '?')}."]
    if trials:
        lines.append(f"Trials: {trials}.")
    if bottleneck:
        lines.append(f"Bottleneck: {bottleneck}.")
    lines.extend(extra)
    return lines


def fmt_bound(rows: Iterable[dict[str, Any]]) -> str:
    """'server (util 0.93) for redis; client ... for valkey' from rows with build/bound/utilization keys."""
    parts = []
    for r in rows:
        util = r.get("server_utilization")
        cutil = r.get("client_utilization")
        detail = []
        if util is not None:
            detail.append(f"server main thread {float(util):.0%} busy")
        if cutil is not None:
            detail.append(f"client {float(cutil):.0%}")
        parts.append(f"{r.get('bound', '?')} for {r.get('build', '?')}" + (f" ({', '.join(detail)})" if detail else ""))
    return "; ".join(parts)
