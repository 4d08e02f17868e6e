"""Each guide page documents exactly the flags (or settings) its code takes, spelled as `--help` spells them.

docs/guide/<command>.md has a "## Flags" table for its `echomq-bench`
command, and locust.md one for the options the scenarios add to Locust's
parser (echomq_bench.locust.options). Every flag the parser shows
(suppressed ones aside) appears in that table, no flag the parser lacks
does, and where the first cell writes a flag with its argument, the argument
is the metavar `--help` prints (choices as `a|b|c`). worker.md documents a
class, not a command: its Settings and Health tables name exactly the fields
of `WorkerSettings` and `WorkerHealth`, with the defaults the dataclass has.
Every page under docs/guide/ is one of these.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from echomq import WorkerHealth, WorkerSettings
from echomq_bench.cli import COMMANDS, build_parser
from echomq_bench.locust.options import DEFAULTS, add_options

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")
FORM = re.compile(r"`(--[a-z0-9-]+)(?: ([^`]+))?`")
FIELD = re.compile(r"`([a-z_][a-z0-9_]*)`")
# The pages that document a class's fields: page -> (section, class).
FIELD_PAGES: dict[str, list[tuple[str, type]]] = {"worker": [("Settings", WorkerSettings),
                                                              ("Health", WorkerHealth)]}


class _LocustFormParser(argparse.ArgumentParser):
    """A plain parser that takes Locust's `include_in_web_ui` keyword: the scenarios' options are
    read from here, because importing locust would monkey-patch this test process."""

    def add_argument(self, *args: Any, include_in_web_ui: bool = True, **kwargs: Any) -> argparse.Action:
        return super().add_argument(*args, **kwargs)


def locust_parser() -> argparse.ArgumentParser:
    parser = _LocustFormParser(add_help=False)
    add_options(parser, DEFAULTS)
    return parser


def page_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each page that documents flags, with the parser that takes them."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {**{name: sub.choices[name] for name in COMMANDS}, "locust": locust_parser()}


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


def section_table(text: str, heading: str = "Flags") -> list[list[str]]:
    """The cells of each row of the table in the page's `## heading` section."""
    assert f"## {heading}\n" in text, f"no '## {heading}' section"
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[1:]]


def documented(text: str) -> tuple[set[str], dict[str, str]]:
    """Every flag named anywhere in the table, and the argument written beside each in a first cell."""
    named: set[str] = set()
    written: dict[str, str] = {}
    for cells in section_table(text):
        # A row names its flags in its first cell; a row of a group ("workload flags") lists them after it.
        forms = FORM.findall(cells[0])
        named.update(flag for flag, _ in forms)
        if not forms:
            named.update(flag for cell in cells[1:] for flag in FLAG.findall(cell))
        for flag, argument in forms:
            written[flag] = argument.replace("\\|", "|")
    return named, written


def drift(parser: argparse.ArgumentParser, text: str) -> dict[str, list[str]]:
    """What the page and the parser disagree on: flags missing from the page, flags the parser
    lacks, and flags whose written argument is not the one `--help` prints."""
    shown = shown_flags(parser)
    named, written = documented(text)
    return {"missing from the page": sorted(set(shown) - named),
            "not taken by the parser": sorted(named - set(shown)),
            "argument not as --help writes it": sorted(f"{flag} {argument} (--help: {flag} {shown[flag]})"
                                                       for flag, argument in written.items()
                                                       if flag in shown and argument != shown[flag])}


NO_DRIFT = {"missing from the page": [], "not taken by the parser": [], "argument not as --help writes it": []}


def test_every_guide_page_is_checked() -> None:
    pages = sorted(p.stem for p in GUIDE.glob("*.md"))
    assert pages == sorted([*page_parsers(), *FIELD_PAGES])


@pytest.mark.parametrize("name", [*COMMANDS, "locust"])
def test_guide_names_exactly_the_parsers_flags(name: str) -> None:
    assert drift(page_parsers()[name], (GUIDE / f"{name}.md").read_text()) == NO_DRIFT, f"docs/guide/{name}.md"


def test_a_drifted_page_is_caught() -> None:
    """The reading above finds a missing flag and a wrong argument in a page built to have both."""
    page = ("## Flags\n\n| flag | meaning |\n|---|---|\n| `--jobs COUNT` | jobs, not `--job` |\n"
            "| shared flags | `--x`, `--y` |\n\n## Out\n")
    named, written = documented(page)
    assert named == {"--jobs", "--x", "--y"}
    assert written["--jobs"] == "COUNT"


def test_a_flag_added_to_a_parser_or_gone_from_it_fails_its_page() -> None:
    text = (GUIDE / "locust.md").read_text()
    grown = locust_parser()
    grown.add_argument("--new-knob", metavar="N")
    assert drift(grown, text)["missing from the page"] == ["--new-knob"]
    renamed = text.replace("`--lease DURATION`", "`--lease-ms N`")
    assert drift(locust_parser(), renamed) == {"missing from the page": ["--lease"],
                                               "not taken by the parser": ["--lease-ms"],
                                               "argument not as --help writes it": []}


def field_rows(text: str, heading: str) -> list[tuple[list[str], list[str]]]:
    """(the names in a row's first cell, its other cells) for each row of the section's table."""
    return [(FIELD.findall(cells[0]), cells[1:]) for cells in section_table(text, heading)]


def _literal(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text.replace("_", ""))
        except ValueError:
            pass
    return {"True": True, "False": False, "None": None}.get(text, text)


@pytest.mark.parametrize("page, heading, cls", [(page, heading, cls) for page, tables in FIELD_PAGES.items()
                                               for heading, cls in tables])
def test_a_class_page_names_exactly_its_fields_with_their_defaults(page: str, heading: str, cls: type) -> None:
    rows = field_rows((GUIDE / f"{page}.md").read_text(), heading)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    named = [name for names, _ in rows for name in names]
    assert sorted(named) == sorted(fields), f"docs/guide/{page}.md, {heading}: names -> {cls.__name__} fields"
    for names, cells in rows:
        written = [part.strip() for part in cells[0].split(",")] if len(cells) > 1 else []
        literal = len(written) == len(names) and all(re.fullmatch(r"-?[0-9_.]+|True|False", w) for w in written)
        if literal:  # a default the page spells as a value (not "same as `concurrency`")
            assert [_literal(w) for w in written] == [fields[n].default for n in names], f"{page}.md: {names}"
