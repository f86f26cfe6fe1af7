"""How fast a folder of documents becomes a corpus (eor.documents): PDF pages, HTML and DOCX documents and
Markdown files per second extracted, passages per second split, and a whole `import_folder` of the folder, first
into an empty place and again after one file changed (only that file is read). The files are written first
by the libraries users' files come from (reportlab's PDFs, python-docx, HTML pages with navigation and a
footer), with generated English-like text, so the figures are about the extraction, not about one corpus.

    python benchmarks/documents_import.py [--files 200] [--json FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import tempfile
import time
from pathlib import Path

WORDS = (
    "retriever reader passage question answer ensemble vote member corpus index dense sparse ranking score "
    "model token context evidence document title section page measure accuracy error cost budget"
).split()


def _text(rng: random.Random, words: int) -> str:
    sentences, left = [], words
    while left > 0:
        size = min(left, rng.randint(8, 20))
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(size)).capitalize() + ".")
        left -= size
    return " ".join(sentences)


def _pdf(rng: random.Random, pages: int) -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    for _ in range(pages):
        text = pdf.beginText(60, 800)
        words = _text(rng, 350).split()
        for start in range(0, len(words), 12):
            text.textLine(" ".join(words[start : start + 12]))
        pdf.drawText(text)
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def _docx(rng: random.Random, sections: int) -> bytes:
    from docx import Document

    word = Document()
    for n in range(sections):
        word.add_heading(f"Section {n + 1}", 1)
        word.add_paragraph(_text(rng, 150))
        word.add_paragraph(_text(rng, 150))
    buffer = io.BytesIO()
    word.save(buffer)
    return buffer.getvalue()


def _html(rng: random.Random, sections: int) -> str:
    body = "".join(f"<h2>Part {n + 1}</h2><p>{_text(rng, 150)}</p><p>{_text(rng, 150)}</p>" for n in range(sections))
    nav = "<nav><a href='/'>Home</a> <a href='/a'>About</a> <a href='/c'>Contact</a></nav>"
    return f"<html><head><title>Page</title></head><body>{nav}<article><h1>Page</h1>{body}</article>" \
           "<footer>Copyright 2026</footer></body></html>"  # fmt: skip


def _markdown(rng: random.Random, sections: int) -> str:
    return "\n\n".join(f"## Part {n + 1}\n\n{_text(rng, 150)}\n\n{_text(rng, 150)}" for n in range(sections))


def write_folder(root: Path, files: int, seed: int = 0) -> dict[str, int]:
    """`files` of each kind under `root`: PDFs of 4 pages, DOCX, HTML and Markdown of 3 sections."""
    rng = random.Random(seed)
    for kind in ("pdf", "docx", "html", "md"):
        (root / kind).mkdir(parents=True, exist_ok=True)
    for n in range(files):
        (root / "pdf" / f"{n:05d}.pdf").write_bytes(_pdf(rng, 4))
        (root / "docx" / f"{n:05d}.docx").write_bytes(_docx(rng, 3))
        (root / "html" / f"{n:05d}.html").write_text(_html(rng, 3), encoding="utf-8")
        (root / "md" / f"{n:05d}.md").write_text(_markdown(rng, 3), encoding="utf-8")
    return {"pdf_pages": 4 * files, "docx": files, "html": files, "md": files}


def main(argv: list[str] | None = None) -> int:
    from eor.documents.extract import extract
    from eor.documents.folder import import_folder
    from eor.documents.split import file_digest, split_document

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200, help="files of each kind (default 200)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "docs"
        counts = write_folder(root, args.files)
        figures: dict[str, float] = {}
        documents = {}
        for kind, unit in (("pdf", "pdf_pages"), ("docx", "docx"), ("html", "html"), ("md", "md")):
            paths = sorted((root / kind).iterdir())
            tick = time.perf_counter()
            documents[kind] = [(path, extract(path)) for path in paths]
            figures[f"{kind}: {unit.replace('_', ' ')} per second"] = counts[unit] / (time.perf_counter() - tick)
        every = [(path, document) for pairs in documents.values() for path, document in pairs]
        tick = time.perf_counter()
        passages = sum(len(split_document(d, p.name, file_digest(p.read_bytes()))) for p, d in every)
        figures["split: passages per second"] = passages / (time.perf_counter() - tick)
        corpus = Path(scratch) / "corpus.jsonl"
        tick = time.perf_counter()
        first = import_folder(root, corpus, progress=False)
        figures["import: seconds, first"] = time.perf_counter() - tick
        changed = root / "md" / "00000.md"
        changed.write_text(changed.read_text(encoding="utf-8") + "\n\nOne more line.\n", encoding="utf-8")
        tick = time.perf_counter()
        again = import_folder(root, corpus, progress=False)
        figures["import: seconds, again after one file changed"] = time.perf_counter() - tick
    print(f"{4 * args.files} files, {first.passages} passages ({passages} split above); "
          f"again: {len(again.read)} read, {len(again.kept)} kept")  # fmt: skip
    for name, value in figures.items():
        print(f"  {name:<48} {value:10.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"files": 4 * args.files, "figures": figures}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
