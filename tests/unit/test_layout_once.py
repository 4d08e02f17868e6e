"""Each verb's KEYS/ARGV order is written in echomq/verbs.py and nowhere else.

A script call spelled by hand is an EVALSHA with its keys typed out: a
`.evalsha(sha, numkeys, key, ...)` call, a command whose first word is
"EVALSHA" followed by more than a SHA and a key count (a call's arguments,
a tuple or a list), a registered script called as `scripts["verb"](keys=[...])`
with its keys typed out, or RESP bytes with EVALSHA in them. Only the module
that spells the layouts, the loader that sends any call, and the RESP
writer that encodes a built call may hold one.
"""

from __future__ import annotations

import ast

from tests.helpers import ROOT

SCANNED = ("echomq", "echomq_bench", "bench", "scenarios", "tests")
ALLOWED = {"echomq/verbs.py", "echomq/scripts.py", "echomq_bench/load/wire.py"}


def _is_evalsha_word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in ("EVALSHA", b"EVALSHA")


def hand_spelled(source: str) -> list[int]:
    """Line numbers of hand-spelled script calls in one module's source."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if attr in ("evalsha", "evalsha_ro") and len(node.args) >= 3:
                lines.append(node.lineno)
            elif node.args and _is_evalsha_word(node.args[0]) and len(node.args) > 3:
                lines.append(node.lineno)
            elif isinstance(node.func, ast.Subscript) and any(
                    kw.arg == "keys" and isinstance(kw.value, (ast.List, ast.Tuple)) and kw.value.elts
                    for kw in node.keywords):
                lines.append(node.lineno)
        elif isinstance(node, (ast.Tuple, ast.List)):
            if node.elts and _is_evalsha_word(node.elts[0]) and len(node.elts) > 3:
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes) and "EVALSHA\r\n".encode() in node.value:
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_rule_catches_each_hand_spelling() -> None:
    spelled = [
        'pipe.evalsha(sha, 2, k.pending, k.active, k.job_prefix, 60_000)',
        'conn.send_command("EVALSHA", sha, 2, k.pending, k.active, k.job_prefix, 60_000)',
        'head = ("EVALSHA", sha, 2, k.active)',
        'command += ["EVALSHA", sha, "2", k.pending, k.active, k.job_prefix, "1"]',
        'cmd = resp(b"EVALSHA", sha, b"2", pending, active, prefix, b"1")',
        'head = b"*7\\r\\n$7\\r\\nEVALSHA\\r\\n$%d\\r\\n%s\\r\\n"',
        'q.scripts["enqueue"](keys=[q.keys.pending, q.keys.job(jid)], args=[jid, b"{}"], client=pipe)',
    ]
    for line in spelled:
        assert hand_spelled(line) == [1], line
    built = [
        'pipe.execute_command(*verbs.claim(k, 60_000).evalsha(sha))',
        'stats = client.info("commandstats").get("cmdstat_evalsha", {})',
        'assert call.evalsha("sha")[:3] == ("EVALSHA", "sha", 2)',
        'key = cmd[3] if str(cmd[0]).upper() == "EVALSHA" else cmd[1]',
        'q.scripts[call.verb](keys=call.keys, args=call.args, client=pipe)',
        'self.script(keys=[zkey], args=[prefix, state])',
    ]
    for line in built:
        assert hand_spelled(line) == [], line


def test_no_module_spells_a_verb_layout_but_verbs_py() -> None:
    found = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED or "/.venv/" in f"/{rel}":
                continue
            lines = hand_spelled(path.read_text())
            if lines:
                found[rel] = lines
    assert not found, f"script calls spelled by hand (build them with echomq.verbs): {found}"

