"""Documents into passages (eor.documents): real files written by real libraries inside the test (reportlab's
PDFs, pypdf's encryption, python-docx's DOCX, HTML pages with navigation and footers, Markdown with headings),
read by the extractors as a user's files would be: the right page and heading on every passage, ids stable
across runs, the navigation out of every passage, and bad files told apart from good ones."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest

from eor.documents.extract import DocumentError, extract
from eor.documents.split import file_digest, split_document

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "The retriever returns passages that the reader reads before it answers the question."  # 13 words


def _pdf(pages: list[str], title: str = "A Study of Readers") -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    pdf.setTitle(title)
    for text in pages:
        y = 800
        for line in text.split("\n"):
            pdf.drawString(72, y, line)
            y -= 14
        pdf.showPage()
    pdf.save()
    return buffer.getvalue()


def _encrypted(data: bytes, password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=password, owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_pdf_page_by_page_with_its_title_and_a_page_without_text(tmp_path):
    path = tmp_path / "study.pdf"
    path.write_bytes(_pdf(["Page one talks about BM25 ranking.", "", "Page three explains MRLR, the measure."]))
    document = extract(path)
    assert document.title == "A Study of Readers"
    assert [(s.page, s.text) for s in document.sections] == [
        (1, "Page one talks about BM25 ranking."),
        (3, "Page three explains MRLR, the measure."),
    ]
    assert document.warnings == ["page 2 has no text (an image-only page?)"]
    passages = split_document(document, "papers/study.pdf", file_digest(path.read_bytes()))
    assert [(p.page, p.file, p.title) for p in passages] == [(1, "papers/study.pdf", "A Study of Readers")] + [
        (3, "papers/study.pdf", "A Study of Readers")
    ]


def test_an_encrypted_pdf_is_refused_unless_it_needs_no_password(tmp_path):
    plain = _pdf(["Secret findings about retrievers."])
    locked = tmp_path / "locked.pdf"
    locked.write_bytes(_encrypted(plain, "secret"))
    with pytest.raises(DocumentError, match="locked.pdf: encrypted with a password"):
        extract(locked)
    open_one = tmp_path / "owner-only.pdf"  # encrypted, with an empty user password: anyone may read it
    open_one.write_bytes(_encrypted(plain, ""))
    assert extract(open_one).sections[0].text == "Secret findings about retrievers."


def test_a_damaged_file_and_an_unknown_format_are_errors_naming_the_file(tmp_path):
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(_pdf(["Some text."])[:200])
    with pytest.raises(DocumentError, match="damaged.pdf: cannot read it as PDF"):
        extract(damaged)
    sheet = tmp_path / "table.xlsx"
    sheet.write_bytes(b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00")  # a zip's first bytes
    with pytest.raises(DocumentError, match=r"table.xlsx: unknown format '.xlsx', and not text; known: .docx, .htm"):
        extract(sheet)


def test_a_docx_by_its_headings_and_tables(tmp_path):
    from docx import Document

    word = Document()
    word.add_heading("Retriever Inconsistency", 0)
    word.add_paragraph("An introduction to the subject.")
    word.add_heading("Measures", 1)
    word.add_paragraph("MRLR measures how often a retriever loses where another wins.")
    table = word.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "measure", "meaning"
    table.cell(1, 0).text, table.cell(1, 1).text = "RWR", "relative win rate"
    path = tmp_path / "notes.docx"
    word.save(str(path))
    document = extract(path)
    assert document.title == "Retriever Inconsistency"
    assert [(s.heading, s.text) for s in document.sections] == [
        ("Retriever Inconsistency", "An introduction to the subject."),
        (
            "Measures",
            "MRLR measures how often a retriever loses where another wins.\n\n"
            "measure | meaning\n\nRWR | relative win rate",
        ),
    ]
    titles = [p.title for p in split_document(document, "notes.docx", "d")]
    assert titles == ["Retriever Inconsistency", "Retriever Inconsistency — Measures"]


NAVIGATION = "Home | Products | About us | Contact the sales team"
FOOTER = "Copyright 2026 Example Corp. All rights reserved. Privacy policy."


def _page(title: str, body: str) -> str:
    return f"""<!doctype html><html><head><title>{title} - Example site</title></head><body>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/p">Products</a></li><li><a href="/a">About us</a></li>
<li><a href="/c">Contact the sales team</a></li></ul></nav></header>
<main><article><h1>{title}</h1>{body}</article></main>
<footer><p>{FOOTER}</p></footer></body></html>"""


def test_html_keeps_the_main_text_and_its_headings_and_leaves_navigation_and_footer_out(tmp_path):
    body = f"<p>{SENTENCE} {SENTENCE}</p><h2>Ensembles</h2><p>Several retrievers feed one reader; a voter picks.</p>"
    path = tmp_path / "page.html"
    path.write_text(_page("Reading Passages", body), encoding="utf-8")
    document = extract(path)
    assert document.title == "Reading Passages"
    assert [s.heading for s in document.sections] == ["Reading Passages", "Ensembles"]
    passages = split_document(document, "page.html", file_digest(path.read_bytes()))
    text = " ".join(p.text + " " + p.title for p in passages)
    assert "Several retrievers feed one reader" in text
    for word in ("Products", "About us", "sales team", "Copyright", "Privacy"):
        assert word not in text


def test_markdown_sections_and_passages_of_about_a_hundred_words_with_offsets(tmp_path):
    long = " ".join([SENTENCE] * 20)  # 260 words in one paragraph
    path = tmp_path / "guide.md"
    path.write_text(f"# Guide\n\nShort intro.\n\n## Long part\n\n{long}\n\n- a list item\n", encoding="utf-8")
    document = extract(path)
    assert [s.heading for s in document.sections] == ["Guide", "Long part"]
    passages = split_document(document, "guide.md", file_digest(path.read_bytes()))
    assert passages[0].text == "Short intro." and passages[0].title == "Guide"
    long_ones = [p for p in passages if p.heading == "Long part"]
    # the long paragraph in three passages of at most 100 words cut between sentences, the list item apart
    assert [len(p.text.split()) for p in long_ones] == [91, 91, 78, 3]  # 7 + 7 + 6 sentences of 13 words
    assert all(p.text.endswith(".") for p in long_ones[:3]) and long_ones[3].text == "a list item"
    section = document.sections[1].text
    assert all(section[p.start : p.end] == p.text for p in long_ones)


def test_ids_depend_on_the_relative_path_content_and_index_alone(tmp_path):
    data = b"# T\n\nOne.\n\n## U\n\nTwo."
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "x.md").write_bytes(data)
    ids = [[p.id for p in split_document(extract(f / "x.md"), "x.md", file_digest(data))] for f in (a, b)]
    assert ids[0] == ids[1] and len(set(ids[0])) == 2
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids[0])
    assert ids[0][0] == hashlib.sha256(f"x.md\0{file_digest(data)}\0{0}".encode()).hexdigest()[:16]
    changed = split_document(extract(a / "x.md"), "x.md", file_digest(data + b"!"))
    assert not set(p.id for p in changed) & set(ids[0])


def test_text_in_another_encoding_is_read_with_a_warning(tmp_path):
    path = tmp_path / "old.txt"
    path.write_bytes("Café au lait, crème brûlée.".encode("latin-1"))
    document = extract(path)
    assert document.sections[0].text == "Café au lait, crème brûlée."
    assert document.warnings == ["not UTF-8 (byte 3): read as Latin-1"]


def _folder(root):
    """A folder of a user's files: Markdown, text, HTML, a PDF, a DOCX, an encrypted PDF, an image, a subfolder."""
    (root / "notes").mkdir(parents=True)
    (root / "guide.md").write_text(f"# Guide\n\n{SENTENCE}\n\n## Setup\n\nInstall it first.\n", encoding="utf-8")
    (root / "notes" / "todo.txt").write_text("Read the eRAG paper again.\n", encoding="utf-8")
    (root / "page.html").write_text(_page("Voting", f"<p>{SENTENCE} {SENTENCE}</p>"), encoding="utf-8")
    (root / "study.pdf").write_bytes(_pdf(["First page.", "Second page."]))
    (root / "locked.pdf").write_bytes(_encrypted(_pdf(["Hidden."]), "secret"))
    (root / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / ".hidden.md").write_text("# Not imported\n", encoding="utf-8")
    _docx(root / "notes" / "report.docx", "Report", "The report's only paragraph.")


def _docx(path: Path, heading: str, paragraph: str) -> None:
    """A DOCX of one heading and one paragraph, as Word writes them (python-docx)."""
    from docx import Document

    word = Document()
    word.add_heading(heading, 1)
    word.add_paragraph(paragraph)
    word.save(str(path))


def test_a_folder_becomes_a_corpus_and_bad_files_are_told_not_fatal(tmp_path):
    from eor.documents.folder import import_folder, manifest_path
    from retrievers.corpus import load_corpus

    root = tmp_path / "docs"
    _folder(root)
    told: list[str] = []
    summary = import_folder(root, tmp_path / "corpus.jsonl", warn=told.append, progress=False)
    assert summary.read == ["guide.md", "notes/report.docx", "notes/todo.txt", "page.html", "study.pdf"]
    assert set(summary.skipped) == {"locked.pdf", "photo.png"}
    assert told == [
        "locked.pdf: skipped, encrypted with a password",
        "photo.png: skipped, unknown format '.png', and not text; known: .docx, .htm, .html, .markdown, .md, .pdf, "
        ".text, .txt",
    ]
    lines = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text().splitlines()]
    assert summary.passages == len(lines) and [p["file"] for p in lines] == sorted(p["file"] for p in lines)
    assert {(p["file"], p["page"]) for p in lines if p["file"] == "study.pdf"} == {
        ("study.pdf", 1),
        ("study.pdf", 2),
    }
    assert [p["title"] for p in lines if p["file"] == "guide.md"] == ["Guide", "Guide — Setup"]
    assert len(load_corpus(tmp_path / "corpus.jsonl")) == len(lines)  # a corpus eor reads as any other
    manifest = json.loads(manifest_path(tmp_path / "corpus.jsonl").read_text())
    assert set(manifest["files"]) == set(summary.read) and manifest["words"] == 100


def test_importing_again_keeps_unchanged_files_and_equals_a_fresh_import(tmp_path):
    from eor.documents.folder import import_folder

    root = tmp_path / "docs"
    _folder(root)
    (root / "scan.pdf").write_bytes(_pdf([""]))  # an image-only page: no passage, a warning
    corpus = tmp_path / "corpus.jsonl"
    first = import_folder(root, corpus, progress=False)
    assert "scan.pdf" in first.read and "scan.pdf: page 1 has no text (an image-only page?)" in first.warnings
    (root / "guide.md").write_text("# Guide\n\nRewritten from scratch.\n", encoding="utf-8")
    (root / "notes" / "todo.txt").unlink()
    (root / "new.md").write_text("# New\n\nA new file.\n", encoding="utf-8")
    again = import_folder(root, corpus, progress=False)
    assert again.read == ["guide.md", "new.md"] and again.removed == ["notes/todo.txt"]
    assert again.kept == ["notes/report.docx", "page.html", "scan.pdf", "study.pdf"]
    fresh = tmp_path / "fresh.jsonl"
    import_folder(root, fresh, progress=False)
    assert corpus.read_bytes() == fresh.read_bytes()
    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    assert "Rewritten from scratch." in texts and "Read the eRAG paper again." not in texts
    untouched = import_folder(root, corpus, progress=False)  # nothing changed: nothing is read
    assert untouched.read == [] and corpus.read_bytes() == fresh.read_bytes()


def test_globs_choose_the_files_and_a_size_limit_skips_big_ones(tmp_path):
    from eor.documents.folder import import_folder, walk

    root = tmp_path / "docs"
    _folder(root)
    assert walk(root, ["*.md"], []) == ["guide.md"]
    assert walk(root, ["notes/**"], ["*.docx"]) == ["notes/todo.txt"]
    assert walk(root, ["**"], ["*.pdf", "*.png", "notes/*"]) == ["guide.md", "page.html"]
    summary = import_folder(root, tmp_path / "c.jsonl", include=["*.md", "*.txt"], max_bytes=40, progress=False)
    assert summary.read == ["notes/todo.txt"] and summary.skipped["guide.md"].endswith("over the limit of 40")


def test_eor_import_corpus_takes_a_folder(tmp_path, capsys):
    from eor.cli import main

    root = tmp_path / "docs"
    _folder(root)
    assert main(["import-corpus", str(root), "--out", str(tmp_path / "c.jsonl"), "--exclude", "*.png"]) == 0
    out, err = capsys.readouterr()
    assert "passages written to" in out and "(5 read, 0 unchanged, 0 removed, 1 skipped files)" in out
    told = [line[line.index("warning:") :] for line in err.splitlines() if "warning:" in line]
    assert told == ["warning: locked.pdf: skipped, encrypted with a password"]
    (tmp_path / "empty").mkdir()
    assert main(["import-corpus", str(tmp_path / "empty"), "--out", str(tmp_path / "e.jsonl")]) == 1
    assert "no passage could be read: nothing written" in capsys.readouterr().out
    assert not (tmp_path / "e.jsonl").exists()
    # a folder of which nothing can be read (scans, a wrong folder) never replaces the corpus already there
    before = (tmp_path / "c.jsonl").read_bytes(), (tmp_path / "c.jsonl.manifest.json").read_bytes()
    assert main(["import-corpus", str(tmp_path / "empty"), "--out", str(tmp_path / "c.jsonl")]) == 1
    assert ((tmp_path / "c.jsonl").read_bytes(), (tmp_path / "c.jsonl.manifest.json").read_bytes()) == before


def test_retrieved_passages_of_an_imported_folder_cite_their_file_and_page(tmp_path):
    from eor.documents.folder import import_folder
    from eor.pipeline.stages.reading import _passage_dict
    from retrievers.bm25 import BM25Retriever

    root = tmp_path / "docs"
    _folder(root)
    import_folder(root, tmp_path / "corpus.jsonl", progress=False)
    found = BM25Retriever(corpus_path=str(tmp_path / "corpus.jsonl"), depth=1).invoke("second page")
    assert found[0].metadata["file"] == "study.pdf" and found[0].metadata["page"] == 2
    assert _passage_dict(found[0]) | {"score": None} == {
        "id": found[0].metadata["id"],
        "title": "A Study of Readers",
        "text": "Second page.",
        "score": None,
        "file": "study.pdf",
        "page": 2,
    }
    todo = BM25Retriever(corpus_path=str(tmp_path / "corpus.jsonl"), depth=1).invoke("eRAG paper")
    assert todo[0].metadata["file"] == "notes/todo.txt" and "page" not in todo[0].metadata  # no pages in text


def test_an_answer_cites_the_passages_it_comes_from_and_the_reader_s_own_knowledge_none():
    from eor.core.results import MemberOutput, Result

    study = {"id": "a1", "title": "A Study", "text": "MRLR measures losses.", "file": "study.pdf", "page": 3}
    other = {"id": "b2", "title": "Notes", "text": "Unrelated text.", "file": "notes.md"}
    written = {"id": "PK:0123456789ab", "title": "", "text": "MRLR measures losses.", "generated": True}
    members = {
        "BM25@2": MemberOutput("losses", [study, other]),
        "PK": MemberOutput("losses", [written]),
        "ReFree": MemberOutput("wins"),
    }
    result = Result("q1", "what does MRLR measure", "losses", "BM25@2", members, {"total": 1.0})
    assert result.sources == [  # the passage that holds the answer, then one read only; PK's document is no source
        {
            "member": "BM25@2",
            "id": "a1",
            "title": "A Study",
            "file": "study.pdf",
            "page": 3,
            "holds": True,
            "sentence": "MRLR measures losses.",
        },
        {"member": "BM25@2", "id": "b2", "title": "Notes", "file": "notes.md", "holds": False},
    ]
    alone = Result("q1", "what does MRLR measure", "wins", "ReFree", members, {"total": 1.0})
    assert alone.sources == []  # the reader's own knowledge
    declined = Result("q1", "q", None, "BM25@2", members, {"total": 1.0})
    assert declined.sources == [] and result.to_dict()["sources"] == result.sources
    from eor.cli.handlers.ask import _sources

    assert (
        _sources(result)
        == 'study.pdf p. 3 [a1]: "MRLR measures losses."\n          read, not holding the answer: notes.md [b2]'
    )
    assert _sources(alone) == "none: the reader's own knowledge (no passage)"
    # another member's passage that holds the answer is a source too, first; the sentence, not the passage
    members["Wiki@1"] = MemberOutput("wins", [{"id": "c3", "title": "Wins", "text": "Intro. MRLR counts wins. More."}])
    alone = Result("q1", "what does MRLR measure", "wins", "ReFree", members, {"total": 1.0})
    assert alone.sources == [
        {"member": "Wiki@1", "id": "c3", "title": "Wins", "holds": True, "sentence": "MRLR counts wins."}
    ]


def test_sources_name_the_passages_that_hold_the_answer_in_every_interface(tmp_path, isolated_cache, capsys):
    """Over a hand-made folder where one retrieved passage holds the answer and another does not: the first is
    the source, with its sentence, the second read only, in `eor ask`'s text, `--json`, `/v1/answer` and the
    OpenAI endpoint's `eor` object; an answer no passage holds says so."""
    import requests
    from openai import OpenAI

    from eor.cli.handlers.ask import format_result
    from eor.core.config import load_config
    from eor.documents.folder import import_folder
    from eor.pipeline.ensemble import Ensemble
    from eor.server import ServerSettings, create_app
    from tests.test_lazy_voting import Scripted
    from tests.test_server import LiveServer

    root = tmp_path / "docs"
    root.mkdir()
    (root / "buffers.md").write_text("# Buffers\n\nData is read in blocks. The default buffer size is 16384 bytes.\n")
    (root / "settings.md").write_text("# Settings\n\nThe buffer size is set in the settings file of the server.\n")
    import_folder(root, tmp_path / "corpus.jsonl", progress=False)
    config_path = tmp_path / "docs.yaml"
    config_path.write_text(
        f"name: docs\ncorpus: {{path: {tmp_path / 'corpus.jsonl'}, documents: {root}}}\nmembers: [BM25@2]\n"
        "voter: {metrics: [em]}\n"
    )
    config = load_config(config_path)
    answer = {"value": "16384"}

    def loader() -> Ensemble:
        return Ensemble(config, reader=Scripted(answer["value"]), cache=False)

    question = "what is the default buffer size of the server"
    expected = [
        {
            "member": "BM25@2",
            "holds": True,
            "file": "buffers.md",
            "sentence": "The default buffer size is 16384 bytes.",
        },
        {"member": "BM25@2", "holds": False, "file": "settings.md"},
    ]

    def same(sources: list[dict]) -> bool:
        return [{k: source.get(k) for k in expected[i]} for i, source in enumerate(sources)] == expected

    result = loader().answer(question)
    assert same(result.sources) and same(result.to_dict()["sources"])  # the Python API and `eor ask --json`
    text = format_result(result)
    assert "Sources:  buffers.md [" in text and ']: "The default buffer size is 16384 bytes."' in text
    assert "\n          read, not holding the answer: settings.md [" in text
    with LiveServer(create_app(config, ServerSettings(), loader=loader)) as server:
        server.wait_ready()
        body = requests.post(f"{server.url}/v1/answer", json={"question": question}, timeout=60).json()
        assert same(body["sources"])
        client = OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=60)
        completion = client.chat.completions.create(model="eor", messages=[{"role": "user", "content": question}])
        assert same(completion.model_extra["eor"]["sources"])
    answer["value"] = "1024"  # the case: an answer none of the passages read holds
    result = loader().answer(question)
    assert [s["holds"] for s in result.sources] == [False, False]
    assert "Sources:  no passage read holds this answer; read: " in format_result(result)


def test_the_seed_papers_as_a_folder_answer_what_mrlr_measures_and_cite_the_paper(tmp_path, capsys):
    from eor.cli import main

    papers = ROOT.parent / "shared" / "papers"
    if not papers.is_dir():
        pytest.skip("the shared papers folder is not next to the project")
    corpus = tmp_path / "papers.jsonl"
    assert main(["import-corpus", str(papers), "--out", str(corpus)]) == 0
    config = tmp_path / "papers.yaml"
    config.write_text(
        f"""name: papers
reader: {{model: smollm2-135m, max_tokens: 16, llama_cpp: {{context_tokens: 2048}}}}
corpus: {{path: {corpus}}}
members: [BM25@1]
voter: {{metrics: [em]}}
"""
    )
    capsys.readouterr()
    assert main(["ask", "what does MRLR measure", "--config", str(config), "--no-cache", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    cited = answer["sources"]
    assert [source["file"] for source in cited] == ["eor-retriever-inconsistency.txt"]
    passages = {p["id"]: p for p in answer["members"]["BM25@1"]["passages"]}
    assert "MRLR" in passages[cited[0]["id"]]["text"]


def test_eor_init_with_documents_imports_them_as_the_corpus(tmp_path, capsys):
    from eor.cli import main
    from eor.core.config import load_config

    root = tmp_path / "docs"
    _folder(root)
    assert main(["init", str(tmp_path / "pool"), "--documents", str(root)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "from 5 files of" in out and "2 skipped:" in out and "only new and changed files are read" in out
    assert "locked.pdf: encrypted with a password" in out and "the demo passages" not in out
    assert "warning: locked.pdf: skipped, encrypted with a password" in captured.err  # each warning, as it happens
    sources = {json.loads(line)["file"] for line in (tmp_path / "pool" / "corpus.jsonl").read_text().splitlines()}
    assert sources == {"guide.md", "notes/report.docx", "notes/todo.txt", "page.html", "study.pdf"}
    config = load_config(tmp_path / "pool" / "config.yaml")
    assert config.corpus.documents == str(root.resolve())  # citations link to the files
    assert "the project's demo corpus" not in (tmp_path / "pool" / "config.yaml").read_text()
    assert not (tmp_path / "pool" / "questions.jsonl").exists() and "none yet: write yours there" in out
    # a documents folder whose path YAML would misread (`: ` and ` #`): named as it is
    odd = tmp_path / "my docs: 2024 #1"
    shutil.copytree(root, odd)
    assert main(["init", str(tmp_path / "odd"), "--documents", str(odd)]) == 0
    assert load_config(tmp_path / "odd" / "config.yaml").corpus.documents == str(odd.resolve())
    # a pool inside its documents would import itself when they are imported again: refused, nothing written
    assert main(["init", str(root / "pool"), "--documents", str(root)]) == 1
    assert "is inside" in capsys.readouterr().err and not (root / "pool").exists()
    # a corpus written inside the folder it imports is never one of its documents
    assert main(["import-corpus", str(root), "--out", str(root / "corpus.jsonl")]) == 0
    capsys.readouterr()
    assert main(["import-corpus", str(root), "--out", str(root / "corpus.jsonl")]) == 0
    assert "(0 read, 5 unchanged, 0 removed, 2 skipped files)" in capsys.readouterr().out
    # a folder that is not there, or holds nothing readable: nothing is left behind
    assert main(["init", str(tmp_path / "none"), "--documents", str(tmp_path / "missing")]) == 1
    assert "not a folder" in capsys.readouterr().err and not (tmp_path / "none").exists()
    (tmp_path / "empty").mkdir()
    assert main(["init", str(tmp_path / "void"), "--documents", str(tmp_path / "empty")]) == 1
    assert not (tmp_path / "void").exists()
    # nor in a folder that was there: its corpus is kept
    corpus = (tmp_path / "pool" / "corpus.jsonl").read_bytes()
    assert main(["init", str(tmp_path / "pool"), "--force", "--documents", str(tmp_path / "empty")]) == 1
    assert (tmp_path / "pool" / "corpus.jsonl").read_bytes() == corpus


def test_the_server_shows_the_imported_files_behind_its_key_and_nothing_else(tmp_path):
    import requests

    from eor.core.config import load_config
    from eor.documents.folder import import_folder
    from eor.server import create_app
    from eor.server.settings import ServerSettings
    from tests.test_server import LiveServer, StandIn

    root = tmp_path / "docs"
    _folder(root)
    (tmp_path / "secret.txt").write_text("not imported")
    import_folder(root, tmp_path / "corpus.jsonl", progress=False)
    config = tmp_path / "served.yaml"
    config.write_text(
        f"""name: served
reader: {{model: smollm2-135m}}
corpus: {{path: {tmp_path / "corpus.jsonl"}, documents: {root}}}
members: [BM25@1]
"""
    )
    app = create_app(load_config(config), ServerSettings(api_key="k3y"), loader=StandIn)
    with LiveServer(app) as server:
        key = {"Authorization": "Bearer k3y"}
        got = requests.get(f"{server.url}/v1/documents/study.pdf", headers=key, timeout=10)
        assert got.status_code == 200 and got.content == (root / "study.pdf").read_bytes()
        assert got.headers["content-type"] == "application/pdf" and "sandbox" in got.headers["content-security-policy"]
        nested = requests.get(f"{server.url}/v1/documents/notes/todo.txt", headers=key, timeout=10)
        assert nested.text == (root / "notes" / "todo.txt").read_text()
        assert requests.get(f"{server.url}/v1/documents/study.pdf", timeout=10).status_code == 401
        for outside in ("../secret.txt", "%2E%2E/secret.txt", "photo.png", "locked.pdf", "missing.md"):
            refused = requests.get(f"{server.url}/v1/documents/{outside}", headers=key, timeout=10)
            assert refused.status_code == 404, outside  # only what the manifest lists, inside the folder


@pytest.mark.parametrize("fault", ["kill", "enospc"])
def test_a_kill_or_a_full_disk_during_an_import_leaves_the_previous_corpus_whole(tmp_path, fault):
    import os
    import subprocess
    import sys

    from eor.documents.folder import import_folder, manifest_path
    from retrievers.corpus import load_corpus

    root = tmp_path / "docs"
    _folder(root)
    corpus = tmp_path / "corpus.jsonl"
    import_folder(root, corpus, progress=False)
    before, manifest = corpus.read_bytes(), manifest_path(corpus).read_bytes()
    (root / "guide.md").write_text("# Guide\n\nChanged.\n", encoding="utf-8")
    point = "file-write:1" if fault == "kill" else "file-write:1:enospc"  # the corpus's own write
    command = [sys.executable, "-m", "eor.cli", "import-corpus", str(root), "--out", str(corpus)]
    done = subprocess.run(command, env={**os.environ, "EOR_FAILPOINTS": point}, capture_output=True, timeout=120)
    assert done.returncode != 0
    assert corpus.read_bytes() == before and manifest_path(corpus).read_bytes() == manifest
    assert len(load_corpus(corpus)) == before.count(b"\n")  # usable as it was
    if fault == "enospc":  # a full disk is told and cleans up; a kill leaves only a hidden temporary file
        assert b"no space left on the device writing" in done.stderr
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    again = import_folder(root, corpus, progress=False)  # the next import completes the change
    assert again.read == ["guide.md"] and b"Changed." in corpus.read_bytes()


SHIPPED = Path(__file__).parent.parent / "docs" / "examples" / "documents"  # real pages: libffi (Expat), Node.js (MIT)


def test_a_new_users_folder_every_file_read_or_plainly_refused(tmp_path, capsys):
    """A folder like a new user's (issue: "your own documents, the first hour"): documentation HTML with `<pre>`
    blocks, Markdown with escapes and tables, a PDF, a DOCX, reStructuredText, an empty file, a damaged PDF, a PNG
    and a subfolder, imported by `eor init --documents`, then one file alone, then imported again after changes."""
    from eor.cli import main
    from eor.core.config import load_config

    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "ffi.html").write_bytes((SHIPPED / "Complex-Type-Example.html").read_bytes())
    (root / "tiers.md").write_bytes((SHIPPED / "diagnostic-tooling-support-tiers.md").read_bytes())
    (root / "manual.pdf").write_bytes(_pdf(["The buffer holds 16384 bytes.", "Page two says nothing more."]))
    (root / "broken.pdf").write_bytes(_pdf(["Lost text."])[:300])
    (root / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
    (root / "empty.txt").write_bytes(b"")
    (root / "intro.rst").write_text("Intro\n=====\n\nThe ``eor`` tool votes over retrievers.\n", encoding="utf-8")
    _docx(root / "sub" / "memo.docx", "Memo", "The memo's only paragraph.")
    assert main(["init", str(tmp_path / "pool"), "--documents", str(root)]) == 0
    captured = capsys.readouterr()
    for told in (
        "broken.pdf: skipped, cannot read it as PDF",
        "photo.png: skipped, unknown format '.png', and not text",
        "empty.txt: empty: no text to read",
        "intro.rst: read as plain text (no reader for .rst)",
    ):
        assert f"warning: {told}" in captured.err
    assert "Traceback" not in captured.err + captured.out and "EOF marker" not in captured.err  # no stray line
    assert "your " in captured.out and "from 6 files of" in captured.out and "2 skipped:" in captured.out
    assert load_config(tmp_path / "pool" / "config.yaml").corpus.documents == str(root.resolve())
    passages = [json.loads(line) for line in (tmp_path / "pool" / "corpus.jsonl").read_text().splitlines()]
    by_file: dict[str, str] = {}
    for passage in passages:
        by_file[passage["file"]] = by_file.get(passage["file"], "") + "\n" + passage["text"]
        assert not passage["title"].split(" — ")[-1].startswith("#")  # no heading made of code
    assert set(by_file) == {"ffi.html", "tiers.md", "manual.pdf", "intro.rst", "sub/memo.docx"}
    assert "#define FFI_COMPLEX_TYPEDEF(name, type, ffitype)" in by_file["ffi.html"]  # code kept as code
    assert "Tracing | trace_gc | No | Yes | 1" in by_file["tiers.md"]  # a table row, its escape resolved
    assert "\\_" not in by_file["tiers.md"] and "**" not in by_file["tiers.md"]
    assert "The ``eor`` tool votes over retrievers." in by_file["intro.rst"]
    # one file alone: a folder of one, whatever its type; a PNG alone is refused in one line
    (tmp_path / "notes.txt").write_text("Notes\tof a user, tab-separated by chance.\n", encoding="utf-8")
    for source, code in (
        (root / "manual.pdf", 0),
        (root / "intro.rst", 0),
        (tmp_path / "notes.txt", 0),
        (root / "photo.png", 1),
    ):
        name = source.name
        out = tmp_path / f"{name}.jsonl"
        assert main(["import-corpus", str(source), "--out", str(out)]) == code
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        if code == 0:
            assert {json.loads(line)["file"] for line in out.read_text().splitlines()} == {name}
        else:
            assert "photo.png: skipped, unknown format" in captured.err
    # imported again after a change, an addition and a removal: the summary names them
    (root / "tiers.md").write_text("# Tiers\n\nNone any more.\n", encoding="utf-8")
    (root / "new.md").write_text("# New\n\nA new page.\n", encoding="utf-8")
    (root / "sub" / "memo.docx").unlink()
    corpus = tmp_path / "pool" / "corpus.jsonl"
    assert main(["import-corpus", str(root), "--out", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "  added: new.md\n" in out and "  changed: tiers.md\n" in out and "  removed: sub/memo.docx\n" in out
    assert "  skipped: broken.pdf, photo.png" in out
    assert main(["import-corpus", str(tmp_path / "missing"), "--out", str(corpus)]) == 1
    assert "missing: no such folder or file" in capsys.readouterr().err
    # a suffix mapped to a reader: the reStructuredText read as Markdown makes its heading a section
    assert (
        main(
            [
                "import-corpus",
                str(root / "intro.rst"),
                "--out",
                str(out_rst := tmp_path / "rst.jsonl"),
                "--reader",
                ".rst=markdown",
            ]
        )
        == 0
    )
    assert [json.loads(line)["title"] for line in out_rst.read_text().splitlines()] == ["Intro"]


def test_eor_retrieve_shows_each_passage_s_file_and_page(tmp_path, capsys):
    from eor.cli import main
    from eor.documents.folder import import_folder

    root = tmp_path / "docs"
    _folder(root)
    import_folder(root, tmp_path / "corpus.jsonl", progress=False)
    config = tmp_path / "docs.yaml"
    config.write_text(f"name: docs\ncorpus: {{path: {tmp_path / 'corpus.jsonl'}}}\nmembers: [BM25@1]\n")
    assert main(["retrieve", "second page", "--config", str(config), "--members", "BM25@1"]) == 0
    assert "A Study of Readers  (study.pdf p. 2): Second page." in capsys.readouterr().out
    assert main(["retrieve", "second page", "--config", str(config), "--members", "BM25@1", "--json"]) == 0
    passage = json.loads(capsys.readouterr().out.splitlines()[0])["passages"][0]
    assert passage["file"] == "study.pdf" and passage["page"] == 2
