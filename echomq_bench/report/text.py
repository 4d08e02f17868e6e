"""The report's blocks as terminal text, no line wider than `WIDTH`.

The same blocks make report.md and report.html (`echomq_bench.report.doc`);
every command prints its record through here, so the terminal says what the
page says. A table wider than the terminal wraps its widest cells over more
lines rather than run off the edge; a chart is named by its file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from echomq_bench.report.doc import Answer, Block, Heading, Image, Notes, Para, Table, Warning, cell

__all__ = ["WIDTH", "render", "table_lines"]

WIDTH = 100
GAP = 2          # spaces between table columns
MIN_COLUMN = 6   # no column is squeezed narrower than this


def render(blocks: Iterable[Block], width: int = WIDTH, base: Path | None = None) -> str:
    """Every block as text; file paths shown relative to `base` when under it."""
    out: list[str] = []
    for block in blocks:
        out += _block(block, width, base)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def _wrap(text: str, width: int, indent: str = "", hanging: str | None = None) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent if hanging is None else hanging,
                         break_long_words=True, break_on_hyphens=False) or [indent.rstrip()]


def _path(path: Path, base: Path | None) -> str:
    return str(path.relative_to(base) if base is not None and path.is_relative_to(base) else path)


def _block(b: Block, width: int, base: Path | None) -> list[str]:
    if isinstance(b, Heading):
        text = b.text[:width]
        return [text, ("=" if b.level <= 1 else "-") * len(text)]
    if isinstance(b, Para):
        return _wrap(b.text, width) + [""]
    if isinstance(b, Warning):
        return _wrap("WARNING: " + b.text, width) + [""]
    if isinstance(b, Notes):
        return [line for note in b.lines for line in _wrap(note, width, "  ")] + [""]
    if isinstance(b, Table):
        head = _wrap(b.caption, width) if b.caption else []
        return head + table_lines(b.frame, width) + [""]
    if isinstance(b, Image):
        return _wrap(f"chart: {_path(b.path, base)} ({b.caption})", width) + [""]
    if isinstance(b, Answer):
        out = [b.question[:width], "-" * min(width, len(b.question))]
        for line in b.lines:
            out += _wrap(line, width, "- ", "  ")
        if b.image is not None:
            out += _wrap(f"chart: {_path(b.image, base)}", width)
        return out + _wrap(b.footnote, width, "  ") + [""]
    out = _block(Heading(b.title, 2), width, base)
    for inner in b.blocks:
        out += _block(inner, width, base)
    return out


def _fit(natural: Sequence[int], width: int) -> list[int]:
    """Column widths that fit `width` with their gaps: the widest column gives way first."""
    widths = list(natural)
    room = width - GAP * (len(widths) - 1)
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= MIN_COLUMN:
            break
        widths[widest] -= 1
    return widths


def table_lines(frame: pd.DataFrame, width: int = WIDTH) -> list[str]:
    """A frame as aligned text: numbers right, words left, wide cells wrapped."""
    columns = [str(c) for c in frame.columns]
    rows = [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    numeric = [all(_numeric(r[i]) for r in rows if r[i]) for i in range(len(columns))]
    natural = [max([len(columns[i])] + [len(r[i]) for r in rows]) for i in range(len(columns))]
    widths = _fit(natural, width)
    out = _row(columns, widths, [False] * len(columns))
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out += _row(r, widths, numeric)
    return [line.rstrip()[:width] for line in out]


def _numeric(text: str) -> bool:
    return text.replace(",", "").replace(".", "", 1).replace("-", "", 1).replace("%", "").strip().isdigit()


def _row(cells: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> list[str]:
    wrapped = [textwrap.wrap(c, w, break_long_words=True, break_on_hyphens=False) or [""]
               for c, w in zip(cells, widths)]
    height = max(len(w) for w in wrapped)
    lines = []
    for k in range(height):
        parts = []
        for lines_of, w, r in zip(wrapped, widths, right):
            text = lines_of[k] if k < len(lines_of) else ""
            parts.append(text.rjust(w) if r else text.ljust(w))
        lines.append((" " * GAP).join(parts))
    return lines
