"""How fast a folder of documents becomes a corpus (eor.documents): PDF pages, HTML and DOCX documents and
Markdown files per second extracted, passages per second split, and a whole `import_folder` of the folder, first
into an empty place and again after one file changed (only that file is read). The files are written first
by the libraries users' files come from (reportlab's PDFs, python-docx, HTML pages with navigation and a
footer), with generated English-like text, so the figures are about the extraction, not about one corpus.

With `--index`, the corpus is also indexed (BM25 and the dense MiniLM index) after the first import, and again
after `--change` of the files changed and the folder imported again: the second build encodes only the changed
files' passages, read the rest from the vector cache (retrievers.vector_cache), and its corpus, BM25 index and
vectors are compared with a fresh import indexed from an empty cache (byte for byte; vectors to 1e-6).

    python -m benchmarks.documents_import [--files 200] [--json FILE]
    python -m benchmarks.documents_import --files 250 --index --json docs/reports/documents-index.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from docx import Document

from eor.documents.extract import extract
from eor.documents.folder import import_folder
from eor.documents.split import file_digest, split_document
from retrievers.bm25 import BM25Retriever
from retrievers.dense import DenseRetriever

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
    # reportlab is a development dependency (the `dev` extra): imported only to write PDFs
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
    return (
        f"<html><head><title>Page</title></head><body>{nav}<article><h1>Page</h1>{body}</article>"
        "<footer>Copyright 2026</footer></body></html>"
    )


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200, help="files of each kind (default 200)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--index", action="store_true", help="also index the corpus, and again after files change")
    parser.add_argument("--change", type=float, default=0.01, help="share of the files changed (default 0.01)")
    args = parser.parse_args(argv)
    if args.index:
        return index_main(args)
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
    print(
        f"{4 * args.files} files, {first.passages} passages ({passages} split above); "
        f"again: {len(again.read)} read, {len(again.kept)} kept"
    )
    for name, value in figures.items():
        print(f"  {name:<48} {value:10.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"files": 4 * args.files, "figures": figures}, indent=1) + "\n")
    return 0


def _indexes(corpus: Path) -> dict[str, Any]:
    """BM25 and the dense index of `corpus` built in the eor cache of the moment: seconds, the passages
    encoded and read from the vector cache, and the vectors."""
    tick = time.perf_counter()
    BM25Retriever(corpus_path=str(corpus), depth=5)
    bm25 = time.perf_counter() - tick
    tick = time.perf_counter()
    dense = DenseRetriever(corpus_path=str(corpus), depth=5)
    seconds = time.perf_counter() - tick
    vectors = np.vstack([dense.index.reconstruct(i) for i in range(dense.index.ntotal)])
    return {"bm25 seconds": bm25, "dense seconds": seconds, **dense.encoded, "vectors": vectors}


def _bm25_bytes(cache: Path) -> dict[str, bytes]:
    folder = next(p for p in (cache / "indexes").iterdir() if p.name.startswith("bm25s-"))
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.name != "meta.json"}


def index_main(args: argparse.Namespace) -> int:
    """The import and both indexes, first and again after `args.change` of the files changed, against a fresh
    import indexed from an empty cache."""
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        root, corpus, cache = base / "docs", base / "corpus.jsonl", base / "cache"
        write_folder(root, args.files)
        os.environ["EOR_CACHE"] = str(cache)
        tick = time.perf_counter()
        first = import_folder(root, corpus, progress=False)
        imported = time.perf_counter() - tick
        built = _indexes(corpus)
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".md", ".html"))
        changed = files[:: max(1, round(1 / args.change))][: max(1, round(args.change * 4 * args.files))]
        for path in changed:
            path.write_text(path.read_text(encoding="utf-8").replace("Part 1", "Part one, revised"), encoding="utf-8")
        tick = time.perf_counter()
        again = import_folder(root, corpus, progress=False)
        reimported = time.perf_counter() - tick
        rebuilt = _indexes(corpus)
        kept_bm25 = _bm25_bytes(cache)
        os.environ["EOR_CACHE"] = str(base / "empty")
        fresh_corpus = base / "fresh.jsonl"
        import_folder(root, fresh_corpus, progress=False)
        fresh = _indexes(fresh_corpus)
        same_bm25 = kept_bm25 == _bm25_bytes(base / "empty")
        same_corpus = corpus.read_bytes() == fresh_corpus.read_bytes()
        largest = float(np.abs(rebuilt["vectors"] - fresh["vectors"]).max())
    report = {
        "files": 4 * args.files,
        "passages": first.passages,
        "changed files": len(changed),
        "first": {"import seconds": imported, **{k: v for k, v in built.items() if k != "vectors"}},
        "again": {
            "import seconds": reimported,
            "files read": len(again.read),
            **{k: v for k, v in rebuilt.items() if k != "vectors"},
        },
        "encoded again / first": rebuilt["encoded"] / built["encoded"],
        "corpus byte-identical to a fresh import": same_corpus,
        "bm25 byte-identical to a fresh build": same_bm25,
        "largest vector difference from an empty cache's": largest,
    }
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    ok = same_corpus and same_bm25 and largest <= 1e-6 and report["encoded again / first"] <= 0.05
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
