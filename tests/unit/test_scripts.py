"""Script discovery and includes, and the verbs' one copy of each layout."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from echomq._instrument import discover, lua_dir
from tests.helpers import write_lua


def test_six_scripts_discovered_with_headers() -> None:
    sources = discover()
    assert {v: s.numkeys for v, s in sources.items()} == {
        "enqueue": 2, "claim": 3, "complete": 2, "retry": 4, "promote": 3, "reap": 3}
    for source in sources.values():
        head = source.path.read_text().split("]]", 1)[0]
        assert "Input:" in head and "Reply:" in head and "KEYS[1]" in head
        assert "@include" not in source.text  # expanded


def test_lua_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "lua"
    shutil.copytree(lua_dir(), copy)
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(copy))
    assert lua_dir() == copy
    monkeypatch.setenv("ECHOMQ_LUA_DIR", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="ECHOMQ_LUA_DIR"):
        lua_dir()


def test_verbs_layout_matches_each_script_header() -> None:
    """echomq.verbs is the one Python copy of the KEYS/ARGV layout: its key
    counts agree with the file names, and the KEYS and ARGV it builds are
    as many as each header declares."""
    import re

    from echomq._instrument import QueueKeys, verbs

    keys = QueueKeys("q")
    sample = {"enqueue": (keys, "JOB0000000000a", b"p"), "claim": (keys, 10), "complete": (keys, "JOB0000000000a", 1),
              "retry": (keys, "JOB0000000000a", 1, b"e", 0, 3), "promote": (keys, 5), "reap": (keys, 5, 3)}
    sources = discover()
    assert set(verbs.VERBS) == set(sources)
    for verb, source in sources.items():
        call = verbs.VERBS[verb](*sample[verb])
        head = source.path.read_text().split("]]", 1)[0]
        declared_keys = len(re.findall(r"KEYS\[\d+\]", head))
        declared_args = len(re.findall(r"ARGV\[\d+\]", head))
        assert (call.verb, len(call.keys), len(call.args)) == (verb, declared_keys, declared_args)
        assert len(call.keys) == source.numkeys
        assert all(k.startswith("emq:{q}:") for k in call.keys)
        assert call.evalsha("sha")[:3] == ("EVALSHA", "sha", source.numkeys)


def test_include_cycle_and_missing_nested_include_are_errors(tmp_path: Path) -> None:
    cycle = write_lua(tmp_path / "a", {"probe-1.lua": '--- @include "x"\nreturn 1\n'},
                      {"x": '--- @include "y"\n', "y": '--- @include "x"\n'})
    with pytest.raises(ValueError, match="include cycle x -> y -> x"):
        discover(cycle)
    missing = write_lua(tmp_path / "b", {"probe-1.lua": '--- @include "x"\nreturn 1\n'},
                        {"x": '--- @include "nowhere"\n'})
    with pytest.raises(FileNotFoundError, match="'nowhere' \\(included from 'x'\\)"):
        discover(missing)
