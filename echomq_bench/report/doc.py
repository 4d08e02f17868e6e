"""A report as a list of blocks, written once as Markdown and once as
self-contained HTML (images inlined as data URIs, so the file opens from
disk and survives being mailed)."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, Union

import pandas as pd

__all__ = ["Heading", "Para", "Table", "Image", "Notes", "Doc"]


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Notes:
    """Small print under a chart or table: the context that number carries."""
    lines: Sequence[str]


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""
    id: str = ""


@dataclass(frozen=True)
class Image:
    path: Path
    caption: str
    alt: str = ""


Block = Union[Heading, Para, Notes, Table, Image]


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return ""
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _md_table(frame: pd.DataFrame) -> str:
    cols = [str(c) for c in frame.columns]
    rows = [[_cell(v).replace("|", "\\|") for v in row] for row in frame.itertuples(index=False)]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in t.frame.itertuples(index=False))
    ident = f' id="{html.escape(t.id)}"' if t.id else ""
    cap = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    return f"<table{ident}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body{font:15px/1.45 system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.7em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:.92em}caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-weight:600}
.notes{color:#555;font-size:.85em;margin:.2em 0 1em}.notes p{margin:.1em 0}
"""

# Records, after load, whether the browser decoded every image: the browser
# test reads this attribute from the rendered DOM.
CHECK_IMAGES = """
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.body.setAttribute('data-images-loaded', ok + '/' + imgs.length);
});
"""


@dataclass
class Doc:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> "Doc":
        self.blocks.extend(blocks)
        return self

    def markdown(self, base: Path) -> str:
        out = [f"# {self.title}", ""]
        for b in self.blocks:
            if isinstance(b, Heading):
                out += ["#" * b.level + " " + b.text, ""]
            elif isinstance(b, Para):
                out += [b.text, ""]
            elif isinstance(b, Notes):
                out += [*(f"<sub>{line}</sub><br>" for line in b.lines), ""]
            elif isinstance(b, Table):
                out += ([f"**{b.caption}**", ""] if b.caption else []) + [_md_table(b.frame), ""]
            elif isinstance(b, Image):
                rel = b.path.relative_to(base) if b.path.is_relative_to(base) else b.path
                out += [f"**{b.caption}**", "", f"![{b.alt or b.caption}]({rel.as_posix()})", ""]
        return "\n".join(out)

    def html(self) -> str:
        parts = []
        for b in self.blocks:
            if isinstance(b, Heading):
                ident = f' id="{html.escape(b.anchor)}"' if b.anchor else ""
                parts.append(f"<h{b.level}{ident}>{html.escape(b.text)}</h{b.level}>")
            elif isinstance(b, Para):
                parts.append(f"<p>{html.escape(b.text)}</p>")
            elif isinstance(b, Notes):
                parts.append('<div class="notes">' + "".join(f"<p>{html.escape(x)}</p>" for x in b.lines) + "</div>")
            elif isinstance(b, Table):
                parts.append(_html_table(b))
            elif isinstance(b, Image):
                data = base64.b64encode(b.path.read_bytes()).decode("ascii")
                parts.append(f'<figure><figcaption>{html.escape(b.caption)}</figcaption>'
                             f'<img alt="{html.escape(b.alt or b.caption)}" '
                             f'src="data:image/png;base64,{data}"></figure>')
        return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
                f"<title>{html.escape(self.title)}</title><style>{STYLE}</style>"
                f"<script>{CHECK_IMAGES}</script></head><body><h1>{html.escape(self.title)}</h1>"
                + "\n".join(parts) + "</body></html>\n")

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        md, page = out_dir / "report.md", out_dir / "report.html"
        md.write_text(self.markdown(out_dir))
        page.write_text(self.html())
        return md, page
