"""Whether each committed baseline was recorded with the scripts in the tree.

Both gates' baselines keep the SHA-1 of every script they measured (as
EVALSHA names it, includes expanded): a timing baseline beside each
script's text (`scripts.<verb>.sha1`), a count baseline as
`scripts.<verb>`. A baseline whose SHAs are not the tree's no longer
describes the code: the timing gate would measure the scripts A/B against
old text and judge that difference, the count gate compare counts of other
code. So a script change and its baselines go together, and this says,
per stale baseline, the command that records it again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from echomq._instrument import lua_dir
from echomq_bench.counts.measure import script_shas
from echomq_bench.microbench.baseline import recorded_shas, script_sha1, shown

__all__ = ["committed_baselines", "out_of_step", "rerecord_command", "stale_baselines"]


def committed_baselines(folder: Path) -> list[Path]:
    """Every baseline file under a baselines folder: gate-<build>.json at its top and per machine fingerprint,
    and counts/count-*.json."""
    return sorted([*folder.glob("gate-*.json"), *folder.glob("*/gate-*.json"), *folder.glob("counts/count-*.json")])


def _shas_of(data: dict[str, Any]) -> dict[str, str | None]:
    """The script SHAs a baseline of either gate records, by verb (None: recorded without one)."""
    scripts = data.get("scripts") or {}
    if all(isinstance(s, str) for s in scripts.values()):   # a count baseline: verb -> SHA-1
        return dict(scripts)
    return recorded_shas(data)


def out_of_step(data: dict[str, Any], tree: dict[str, str]) -> list[str]:
    """How a baseline's recorded scripts differ from the tree's: one phrase per verb; empty when in step."""
    recorded = _shas_of(data)
    out = []
    for verb in sorted(set(recorded) | set(tree)):
        mine, theirs = recorded.get(verb, ""), tree.get(verb, "")
        if verb not in tree:
            out.append(f"{verb} (not in the tree)")
        elif verb not in recorded:
            out.append(f"{verb} (not in the baseline)")
        elif mine is None:
            text = (data["scripts"][verb] or {}).get("text")
            same = text is not None and script_sha1(text) == theirs
            out.append(f"{verb} (recorded without its SHA; its text {'is' if same else 'is not'} the tree's)")
        elif mine != theirs:
            out.append(f"{verb} ({mine[:10]} recorded, {theirs[:10]} in the tree)")
    return out


def rerecord_command(path: Path, data: dict[str, Any]) -> str:
    """The command that records this baseline again, on a machine where its build runs."""
    build = str(data.get("build") or "redis")
    if str(data.get("schema", "")).startswith("echomq-count-baseline"):
        # Keyed by the binary: the default folder files the new counts under the same name for the same binary.
        binary = data.get("binary") or {}
        return (f"`echomq-bench gate --count instructions --update --server {build}` (deterministic: any machine "
                f"with {binary.get('version', 'that binary')}, sha256 {str(binary.get('sha256', ''))[:12]})")
    return (f"`echomq-bench gate --count time --update --server {build} --baseline {shown(path)}` (on a quiet "
            f"machine of the fingerprint it is for)")


def stale_baselines(folder: Path, lua: Path | str | None = None) -> list[str]:
    """Per baseline under `folder` whose scripts are not `lua`'s (default: the scripts in use): what differs,
    and the command that records it again. Empty when every baseline is in step."""
    scripts = Path(lua) if lua is not None else lua_dir()
    tree = script_shas(scripts)
    out = []
    for path in committed_baselines(folder):
        data = json.loads(path.read_text())
        differ = out_of_step(data, tree)
        if differ:
            out.append(f"{shown(path)} was recorded with other scripts than {shown(scripts)}: "
                       f"{', '.join(differ)}; record it again with {rerecord_command(path, data)}")
    return out
