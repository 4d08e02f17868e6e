"""Each command's guide page documents exactly the flags its parser takes, spelled as `--help` spells them.

docs/guide/<command>.md has a "## Flags" table. Every flag the parser shows
(suppressed aliases aside) appears in that table, no flag the parser lacks
does, and where the first cell writes a flag with its argument, the argument
is the metavar `--help` prints (choices as `a|b|c`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from echomq_bench.cli import COMMANDS, build_parser

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")
FORM = re.compile(r"`(--[a-z0-9-]+)(?: ([^`]+))?`")


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub.choices[name] for name in COMMANDS}


def shown_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each flag `--help` shows, with the argument it prints after it ('' for a switch)."""
    shown = {}
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        if action.nargs == 0:
            argument = ""
        elif action.metavar is not None:
            argument = str(action.metavar)
        elif action.choices is not None:
            argument = "|".join(str(c) for c in action.choices)
        elif action.dest:
            argument = action.dest.upper()
        if isinstance(action, argparse._ExtendAction) and argument:
            argument += ",..."  # a list: the flag repeats or takes a comma list
        for option in action.option_strings:
            shown[option] = argument
    return shown


def flags_table(text: str) -> list[list[str]]:
    """The cells of each row of the page's Flags table."""
    section = text.split("## Flags", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[1:]]


def documented(text: str) -> tuple[set[str], dict[str, str]]:
    """Every flag named anywhere in the table, and the argument written beside each in a first cell."""
    named: set[str] = set()
    written: dict[str, str] = {}
    for cells in flags_table(text):
        # A row names its flags in its first cell; a row of a group ("workload flags") lists them after it.
        forms = FORM.findall(cells[0])
        named.update(flag for flag, _ in forms)
        if not forms:
            named.update(flag for cell in cells[1:] for flag in FLAG.findall(cell))
        for flag, argument in forms:
            written[flag] = argument.replace("\\|", "|")
    return named, written


@pytest.mark.parametrize("name", list(COMMANDS))
def test_guide_names_exactly_the_parsers_flags(name: str) -> None:
    shown = shown_flags(command_parsers()[name])
    named, _ = documented((GUIDE / f"{name}.md").read_text())
    assert sorted(set(shown) - named) == [], f"docs/guide/{name}.md lacks these flags"
    assert sorted(named - set(shown)) == [], f"docs/guide/{name}.md names flags `{name}` does not take"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_guide_writes_each_flags_argument_as_help_does(name: str) -> None:
    shown = shown_flags(command_parsers()[name])
    _, written = documented((GUIDE / f"{name}.md").read_text())
    wrong = {flag: (argument, shown[flag]) for flag, argument in written.items()
             if flag in shown and argument != shown[flag]}
    assert wrong == {}, f"docs/guide/{name}.md: flag -> (guide, --help)"


def test_a_drifted_page_is_caught() -> None:
    """The reading above finds a missing flag and a wrong argument in a page built to have both."""
    page = ("## Flags\n\n| flag | meaning |\n|---|---|\n| `--jobs COUNT` | jobs, not `--job` |\n"
            "| shared flags | `--x`, `--y` |\n\n## Out\n")
    named, written = documented(page)
    assert named == {"--jobs", "--x", "--y"}
    assert written["--jobs"] == "COUNT"
