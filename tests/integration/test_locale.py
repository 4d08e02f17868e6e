"""The check story on a server that collates by a UTF-8 locale.

Redis and Valkey call setlocale(LC_COLLATE, "") at start, and Lua's < and >
on strings call strcoll, so a script's string compare follows the locale
of the server's environment. The job id's bound is checked byte by byte;
the story J6 holds ids where the two orders disagree. The locale is built
into a folder of the test's own (localedef, from Debian's `locales`
definitions), so the machine's installed locales do not matter."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from echomq_bench.conformance.stories import STORIES, run_check
from echomq_bench.servers import BUILTIN_BINARIES, EmbeddedServer, parse_server_spec

LOCALE = "en_US.UTF-8"
DEFINITION = Path("/usr/share/i18n/locales/en_US")  # Debian's `locales` package, which setup installs


@pytest.fixture(scope="module")
def locale_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert DEFINITION.is_file() and shutil.which("localedef"), \
        f"{DEFINITION} and localedef are needed (Debian: apt-get install locales; setup.sh --test does it)"
    folder = tmp_path_factory.mktemp("locales")
    subprocess.run(["localedef", "-i", "en_US", "-f", "UTF-8", str(folder / LOCALE)], check=True,
                   capture_output=True)
    return folder


@pytest.fixture(scope="module", params=list(BUILTIN_BINARIES))
def collating_server(request: pytest.FixtureRequest, locale_dir: Path) -> Iterator[EmbeddedServer]:
    class CollatingServer(EmbeddedServer):
        def _environment(self) -> dict[str, str]:
            return {**os.environ, "LOCPATH": str(locale_dir), "LC_ALL": LOCALE}

    srv = CollatingServer(parse_server_spec(request.param))
    try:
        yield srv
    finally:
        srv.stop()


def test_the_server_collates_by_the_locale(collating_server: EmbeddedServer) -> None:
    """The premise: under en_US 'a' sorts before 'B', in bytes after it."""
    with collating_server.client() as c:
        assert c.eval("return ('a' < 'B') and 1 or 0", 0) == 1


def test_the_check_story_passes_under_a_utf8_locale(collating_server: EmbeddedServer) -> None:
    with collating_server.client() as c:
        lines = list(run_check(c))
    assert len(lines) == len(STORIES)
    assert [str(line) for line in lines if not line.ok] == []
