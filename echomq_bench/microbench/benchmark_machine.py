"""The pytest-benchmark route's machine check: this project's machine
fingerprint in pytest-benchmark's machine_info, and the warning given when a
saved run was measured on another one.

pytest-benchmark times the client round trip in raw seconds, and
`--benchmark-compare-fail` holds those seconds against a saved run's. Seconds
measured on another CPU, core count, server build or allocator say nothing
about a change in the code, so a comparison across fingerprints is named as
such, field by field. The fingerprint is the gate's (`baseline.fingerprint`):
the CPU model and a hash of its flags and the cores once, the server version
and allocator per build (`redis.server_version`).

pytest-benchmark asks for machine_info when it loads the run to compare
against, at configure time, before any benchmark's server runs, and again
when it saves, after they have stopped; `measured_fingerprint` therefore
starts each build's server for the moment it takes to ask it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = ["FINGERPRINT_KEY", "MACHINE_FIELDS", "run_fingerprint", "measured_fingerprint", "differences",
           "cross_machine_warning"]

FINGERPRINT_KEY = "echomq_fingerprint"
MACHINE_FIELDS = ("cpu_model", "cpu_flags_sha256", "cores")   # the rest of a fingerprint belongs to a build


def run_fingerprint(by_build: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One fingerprint for a run over several builds: the machine's fields
    once (from the first build's), each build's own fields as BUILD.FIELD."""
    if not by_build:
        raise ValueError("a run's fingerprint needs at least one build")
    first = next(iter(by_build.values()))
    out = {f: first.get(f) for f in MACHINE_FIELDS}
    for build, fp in by_build.items():
        out.update({f"{build}.{f}": v for f, v in fp.items() if f not in MACHINE_FIELDS})
    return out


def measured_fingerprint(specs: Iterable[Any]) -> dict[str, Any]:
    """`run_fingerprint` of these server specs, each server started (or reached) just to ask it."""
    from echomq_bench.microbench.baseline import fingerprint
    from echomq_bench.servers import start

    by_build = {}
    for spec in specs:
        with start(spec) as server:
            client = server.client()
            try:
                by_build[server.name] = fingerprint(client)
            finally:
                client.close()
    return run_fingerprint(by_build)


def differences(here: Mapping[str, Any], saved: Mapping[str, Any]) -> list[str]:
    """Each field that differs: `cores 2 here, 64 saved`; a field on one side only says so."""
    out = []
    for field in [*here, *(f for f in saved if f not in here)]:
        mine, theirs = here.get(field, "absent"), saved.get(field, "absent")
        if field not in here or field not in saved or mine != theirs:
            out.append(f"{field} {mine} here, {theirs} saved")
    return out


def cross_machine_warning(here: Mapping[str, Any], saved_machine_info: Mapping[str, Any],
                          saved_name: str) -> str | None:
    """The warning for comparing against the saved run `saved_name`, or None
    when it was measured on this fingerprint."""
    saved = saved_machine_info.get(FINGERPRINT_KEY)
    if isinstance(saved, Mapping):
        changed = differences(here, saved)
        if not changed:
            return None
        what = f"was measured on another machine fingerprint: {'; '.join(changed)}"
    else:
        what = "carries no echomq machine fingerprint, so whether it was measured on this machine is unknown"
    return (f"the saved run {saved_name} {what}. pytest-benchmark compares raw round-trip seconds across these "
            "runs, and seconds do not carry across machines: --benchmark-compare-fail is not meaningful against "
            "this run. To compare across machines use `echomq-bench gate`, which counts each verb's instructions "
            "against a baseline of the same server binary, whatever the machine.")
