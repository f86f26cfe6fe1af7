"""Self-contained HTML pages from a report's Markdown: every report's page (eor.evaluation.writing.writer), the
benchmark reports `eor serve --reports` shows, and `eor compare --html`.

The page is the Markdown rendered by markdown-it-py (CommonMark with tables, raw HTML off, so nothing in a
member's name can inject markup), with every figure embedded as a `data:` URI and the style inline: one
file that opens with no network and no folder beside it.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from typing import Any

from eor.core.errors import InputError

#: a page's title, as the report's writer gave it
TITLE = re.compile(r"<title>(.*?)</title>", re.DOTALL)
IMAGE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}

STYLE = """
:root { color-scheme: light; --ink: #1f2933; --rule: #d5dbe1; --head: #f1f4f7; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: var(--ink);
       max-width: 1100px; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid var(--rule); }
table { border-collapse: collapse; margin: 0.75rem 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--rule); padding: 0.25rem 0.55rem; text-align: left; vertical-align: top; }
thead th { background: var(--head); }
tbody tr:nth-child(even) { background: #fafbfc; }
code { font-size: 0.9em; background: var(--head); padding: 0 0.25em; border-radius: 3px; }
img { max-width: 100%; height: auto; display: block; margin: 0.75rem 0; }
"""


def _markdown() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table")


def render_html(markdown: str, title: str, images: Path | None = None) -> str:
    """The page for `markdown`; its images are read from folder `images` and embedded (a missing image, or
    one outside the folder, raises InputError: a page that silently lacked a figure would mislead)."""
    parser = _markdown()
    tokens = parser.parse(markdown)
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                child.attrSet("src", _data_uri(str(child.attrGet("src")), images))
    body = parser.renderer.render(tokens, parser.options, {})
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n<main>\n{body}</main>\n</body>\n</html>\n"
    )


def _data_uri(source: str, folder: Path | None) -> str:
    if folder is None:
        raise InputError(f"the page names image {source!r} but has no folder to read it from")
    path = (folder / source).resolve()
    kind = IMAGE_TYPES.get(path.suffix.lower())
    if kind is None or not path.is_relative_to(folder.resolve()) or not path.is_file():
        raise InputError(f"image {source!r} of the report is missing from {folder} (or is not a PNG, SVG or JPEG)")
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def report_html(folder: str | Path) -> str:
    """`report.html` for a report folder holding `report.md` and its figures, titled by the kind its writer gave
    the page beside it (a judge voter's report is not a benchmark's), else as a benchmark's (a report written
    before pages were), and the folder's name now."""
    folder = Path(folder)
    markdown = folder / "report.md"
    if not markdown.is_file():
        raise InputError(f"no report.md in {folder}")
    kind = _written_kind(folder) or "eor benchmark"
    return render_html(markdown.read_text(encoding="utf-8"), f"{kind}: {folder.name}", folder)


def _written_kind(folder: Path) -> str | None:
    """The kind's title the writer put before the folder's name in its page's title (`eor judge: NAME`)."""
    try:
        with (folder / "report.html").open(encoding="utf-8", errors="replace") as page:
            head = page.read(4096)
    except OSError:
        return None
    found = TITLE.search(head)
    return None if found is None else html.unescape(found.group(1)).partition(": ")[0].strip() or None
