"""What a fresh interpreter loads: a child Python imports one entry point and
prints the modules it pulled in, since this test process has loaded them all."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT, child_env


def _loaded_after(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=child_env())


def test_check_help_imports_no_command_module_but_its_own() -> None:
    done = _loaded_after("import sys\n"
                         "from echomq_bench.cli import main\n"
                         "try:\n    main(['check', '--help'])\nexcept SystemExit:\n    pass\n"
                         "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'matplotlib') "
                         "or m.startswith('echomq_bench.commands.')), file=sys.stderr)\n")
    assert done.returncode == 0, done.stderr
    assert "usage: echomq-bench check" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "['echomq_bench.commands.check']", done.stderr


def test_the_call_log_checker_loads_neither_the_load_engine_nor_a_server_client() -> None:
    done = _loaded_after("import sys, echomq_bench.measurement.calllog_check; "
                         "print(sorted(m for m in sys.modules "
                         "if m.startswith(('echomq_bench.load', 'redis', 'echomq.'))))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
