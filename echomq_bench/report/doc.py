"""A report as a list of blocks, rendered three ways from the same blocks:
Markdown, self-contained HTML (images inlined as data URIs, so the file
opens from disk and survives being mailed) and terminal text
(`echomq_bench.report.text`).

The main job's page opens with `Answer` blocks, one per question it
answers, laid out two by two so the four fit one screen; everything else
goes in `Fold` blocks, which HTML shows closed (`<details>`) and the other
two render as plain sections.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, Union

import pandas as pd

__all__ = ["Heading", "Para", "Table", "Image", "Notes", "Answer", "Warning", "Fold", "Block", "Doc", "cell"]


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


@dataclass(frozen=True)
class Answer:
    """One of the questions the main job answers: its answer in a sentence (a
    line per build where the question is asked of each), one chart, and the
    method, n, exclusions and bound said once, in a footnote."""
    question: str
    lines: Sequence[str]
    image: Path | None
    footnote: str
    anchor: str


@dataclass(frozen=True)
class Warning:
    """What a reader must know before the answers: that they are too short to trust, say."""
    text: str


@dataclass(frozen=True)
class Fold:
    """A section a reader opens when they want it: a title and its blocks."""
    title: str
    blocks: Sequence["Block"]
    anchor: str = ""


Block = Union[Heading, Para, Notes, Table, Image, Answer, Warning, Fold]


def cell(value: object) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return ""
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _md_table(frame: pd.DataFrame) -> str:
    cols = [str(c) for c in frame.columns]
    rows = [[cell(v).replace("|", "\\|") for v in row] for row in frame.itertuples(index=False)]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in row) + "</tr>"
        for row in t.frame.itertuples(index=False))
    ident = f' id="{html.escape(t.id)}"' if t.id else ""
    cap = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    return f"<div class=scroll><table{ident}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _rel(path: Path, base: Path) -> str:
    return (path.relative_to(base) if path.is_relative_to(base) else path).as_posix()


STYLE = """
body{font:13px/1.35 system-ui,sans-serif;max-width:1380px;margin:0 auto;padding:6px 12px;color:#222}
h1{font-size:1.2em;margin:.1em 0}.context{color:#555;font-size:.85em;margin:0 0 5px}
h2{font-size:1.05em;margin:0 0 .15em}
.answers{display:grid;grid-template-columns:1fr 1fr;gap:7px 12px}
.answer{border:1px solid #ddd;border-radius:4px;padding:5px 9px;display:flex;flex-direction:column}
.answer ul{margin:0;padding-left:1.1em}.answer li{margin:0}
.answer img{height:215px;max-width:100%;object-fit:contain;align-self:center;margin:2px 0}
.foot{color:#555;font-size:.76em;line-height:1.25;margin:0}
.warning{background:#fff3cd;border:1px solid #e0c36a;padding:4px 8px;margin:0 0 6px}
details{border-top:1px solid #ddd;padding:.3em 0}summary{font-weight:600;cursor:pointer;font-size:1.02em}
details h3{font-size:1em}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-weight:600}
.notes{color:#555;font-size:.82em;margin:.2em 0 1em}.notes p{margin:.1em 0}
"""

# After load, the page records whether the browser decoded every image, and
# where each answer and its chart ended up: the browser test reads both
# attributes from the rendered DOM.
CHECK_PAGE = """
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.body.setAttribute('data-images-loaded', ok + '/' + imgs.length);
  var out = [], answers = document.querySelectorAll('.answer');
  for (var j = 0; j < answers.length; j++) {
    var a = answers[j].getBoundingClientRect(), img = answers[j].querySelector('img');
    var b = img ? img.getBoundingClientRect() : null;
    out.push(answers[j].id + ':' + Math.round(a.bottom) + ':' + (b ? Math.round(b.bottom) + ':' +
             Math.round(b.height) : 'none'));
  }
  document.body.setAttribute('data-answers', out.join(' '));
});
"""


@dataclass
class Doc:
    title: str
    context: str = ""
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> "Doc":
        self.blocks.extend(blocks)
        return self

    def markdown(self, base: Path) -> str:
        out = [f"# {self.title}", ""] + ([self.context, ""] if self.context else [])
        for b in self.blocks:
            out += _md_block(b, base)
        return "\n".join(out)

    def html(self) -> str:
        answers = [b for b in self.blocks if isinstance(b, Answer)]
        warnings = [b for b in self.blocks if isinstance(b, Warning)]
        rest = [b for b in self.blocks if not isinstance(b, (Answer, Warning))]
        grid = ('<section class="answers" id="answers">' + "".join(_html_answer(a) for a in answers)
                + "</section>") if answers else ""
        context = f'<p class="context">{html.escape(self.context)}</p>' if self.context else ""
        return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{html.escape(self.title)}</title><style>{STYLE}</style>"
                f"<script>{CHECK_PAGE}</script></head><body><h1>{html.escape(self.title)}</h1>{context}"
                + "".join(_html_block(w) for w in warnings) + grid
                + "\n".join(_html_block(b) for b in rest) + "</body></html>\n")

    def write(self, out_dir: Path) -> tuple[Path, Path]:
        md, page = out_dir / "report.md", out_dir / "report.html"
        md.write_text(self.markdown(out_dir))
        page.write_text(self.html())
        return md, page


def _md_block(b: Block, base: Path) -> list[str]:
    if isinstance(b, Heading):
        return ["#" * b.level + " " + b.text, ""]
    if isinstance(b, (Para, Warning)):
        return [f"**{b.text}**" if isinstance(b, Warning) else b.text, ""]
    if isinstance(b, Notes):
        return [*(f"<sub>{line}</sub><br>" for line in b.lines), ""]
    if isinstance(b, Table):
        return ([f"**{b.caption}**", ""] if b.caption else []) + [_md_table(b.frame), ""]
    if isinstance(b, Image):
        return [f"**{b.caption}**", "", f"![{b.alt or b.caption}]({_rel(b.path, base)})", ""]
    if isinstance(b, Answer):
        chart = [f"![{b.question}]({_rel(b.image, base)})", ""] if b.image else []
        return [f"## {b.question}", "", *(f"- {line}" for line in b.lines), "", *chart, f"<sub>{b.footnote}</sub>", ""]
    out = [f"## {b.title}", ""]
    for inner in b.blocks:
        out += _md_block(inner, base)
    return out


def _html_answer(a: Answer) -> str:
    items = "".join(f"<li>{html.escape(line)}</li>" for line in a.lines)
    img = f'<img alt="{html.escape(a.question)}" src="{_data_uri(a.image)}">' if a.image else ""
    return (f'<article class="answer" id="{html.escape(a.anchor)}"><h2>{html.escape(a.question)}</h2>'
            f'<ul>{items}</ul>{img}<p class="foot">{html.escape(a.footnote)}</p></article>')


def _html_block(b: Block) -> str:
    if isinstance(b, Heading):
        ident = f' id="{html.escape(b.anchor)}"' if b.anchor else ""
        level = b.level + 1   # inside a fold, under the fold's own summary line
        return f"<h{level}{ident}>{html.escape(b.text)}</h{level}>"
    if isinstance(b, Para):
        return f"<p>{html.escape(b.text)}</p>"
    if isinstance(b, Warning):
        return f'<p class="warning">{html.escape(b.text)}</p>'
    if isinstance(b, Notes):
        return '<div class="notes">' + "".join(f"<p>{html.escape(x)}</p>" for x in b.lines) + "</div>"
    if isinstance(b, Table):
        return _html_table(b)
    if isinstance(b, Image):
        return (f'<figure><figcaption>{html.escape(b.caption)}</figcaption>'
                f'<img alt="{html.escape(b.alt or b.caption)}" src="{_data_uri(b.path)}"></figure>')
    if isinstance(b, Answer):
        return _html_answer(b)
    ident = f' id="{html.escape(b.anchor)}"' if b.anchor else ""
    return (f"<details{ident}><summary>{html.escape(b.title)}</summary>"
            + "\n".join(_html_block(inner) for inner in b.blocks) + "</details>")
