"""The explorer end to end, in a real headless Chromium: Debian's `chromium` driven by Playwright's Python
package (which downloads no browser), against `eor serve` of the default config (Qwen2.5-0.5B, seven
members, the demo corpus) on 127.0.0.1 with a bearer key and a reports folder written by `eor bench`.

`make test` installs Chromium and sets EOR_REQUIRE_BROWSER=1, so a missing browser fails there; a bare
`pytest` on a machine without one skips these tests. Screenshots go to the test's folder, or to
EOR_SCREENSHOTS when set.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT
from tests.test_server import free_port

CHROMIUM = os.environ.get("EOR_CHROMIUM", "/usr/bin/chromium")
# As root in a container, without a GPU, and with no reaching out (the machine's network is closed).
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
KEY = "explorer-e2e-key"
QUESTION = "who painted the mona lisa"
WAIT_MS = 300_000  # the first answer of seven members on two cores


def _browser_or_skip():
    required = os.environ.get("EOR_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            raise
        pytest.skip("Playwright is not installed (make install)")
    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        if required:
            pytest.fail(f"no Chromium at {CHROMIUM}: `make install` installs Debian's chromium")
        pytest.skip(f"no Chromium at {CHROMIUM}")
    return sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator:
    sync_playwright = _browser_or_skip()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("EOR_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    """A reports folder holding the benchmark of the 7-member NQ records the repository keeps."""
    root = tmp_path_factory.mktemp("reports")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "eor.cli",
            "bench",
            str(ROOT / "docs/records/nq-dev.jsonl.gz"),
            "--config",
            str(ROOT / "configs/nq-offline.yaml"),
            "--out",
            str(root / "nq-dev"),
            "--metrics",
            "em,f1",
            "--resamples",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (root / "nq-dev" / "report.html").is_file()
    return root


@contextlib.contextmanager
def serving(arguments: list[str], folder: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """`eor serve` with `arguments` on a free port of 127.0.0.1 (its cache and log in `folder`), once healthy:
    its base URL. Stopped after; its log must hold no traceback."""
    port = free_port()
    log = folder / "server.log"
    environment = {**os.environ, "EOR_CACHE": str(folder / "cache"), **(env or {})}
    command = [sys.executable, "-m", "eor.cli", "serve", *arguments, "--port", str(port)]
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=environment)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert process.poll() is None, log.read_text()[-3000:]
            time.sleep(0.3)
        else:
            raise RuntimeError("the server did not get ready:\n" + log.read_text()[-3000:])
        yield base
    finally:
        process.terminate()
        process.wait(30)
    assert "Traceback" not in log.read_text()


@pytest.fixture(scope="module")
def server(browser, reports, tmp_path_factory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("serve")
    arguments = ["--config", str(ROOT / "configs/default.yaml"), "--api-key-env", "EOR_E2E_KEY"]
    arguments += ["--reports", str(reports), "--all-members"]
    with serving(arguments, folder, {"EOR_E2E_KEY": KEY}) as base:
        yield base


def _watch(page) -> list[str]:
    """Console errors and requests that left 127.0.0.1 (there must be none)."""
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    local = re.compile(r"(http://127\.0\.0\.1:\d+/|data:|about:)")
    page.on("request", lambda r: None if local.match(r.url) else problems.append(f"request elsewhere: {r.url}"))
    return problems


def test_ask_see_every_member_the_heatmap_and_the_passages(browser, server, shots):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = _watch(page)
    page.goto(server + "/")
    page.wait_for_function("() => document.getElementById('pool').textContent.startsWith('7 members in the pool: ')")
    pool = requests.get(f"{server}/healthz", timeout=10).json()["members"]

    # Without the key: the 401 opens the key box and puts the focus in it.
    page.keyboard.type(QUESTION)  # the question box has the focus on load
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('status').textContent.includes('API key')")
    assert page.evaluate("document.activeElement.id") == "api-key"
    problems.clear()  # the 401 itself is logged by the browser as a failed resource

    # With the key, from the keyboard: Enter in the key box uses it and asks again.
    page.keyboard.type(KEY)
    page.keyboard.press("Enter")
    page.wait_for_selector("#working:not([hidden])", timeout=10_000)  # progress while the reader works
    page.wait_for_function("() => /\\d+ s/.test(document.getElementById('elapsed').textContent)")
    page.wait_for_selector("#results:not([hidden])", timeout=WAIT_MS)
    assert page.is_hidden("#working")
    assert page.evaluate("document.activeElement.id") == "results"

    # The page shows what the API answers (greedy decoding: the same question, the same vote).
    asked = {"question": QUESTION, "explain": True, "return_passages": True}
    api = requests.post(f"{server}/v1/answer", json=asked, headers={"Authorization": f"Bearer {KEY}"}, timeout=600)
    api = api.json()
    assert page.inner_text("#answer strong") == api["answer"]
    assert api["given_by"][0] == api["member"]  # the answer credited to every member that gave it
    assert f"given by {', '.join(api['given_by'])}" in page.inner_text("#answer-note")

    rows = page.locator("#members tbody tr")
    assert rows.count() == len(pool) == 7
    assert [rows.nth(i).get_attribute("data-member") for i in range(7)] == pool
    for i, name in enumerate(pool):
        cells = [rows.nth(i).locator("th, td").nth(c).inner_text() for c in range(7)]
        assert cells[1] == api["members"][name]["answer"]
        assert cells[2] == f"{api['members'][name]['score']:.3f}"
        assert cells[3] == f"{api['explanation']['members'][name]['weight']:.3f}"
        confidence = api["members"][name]["confidence"]  # the reader's, kept with the answer in the cache
        assert cells[4] == f"p {math.exp(confidence['mean_logprob']):.2f} · margin {confidence['first_margin']:.2f}"
        assert cells[5] == ("chosen" if name == api["member"] else "voted")
    assert page.locator("#members tr.chosen").count() == 1

    # The heatmap: every ordered pair of voting members, the diagonal marked.
    assert page.locator("#heatmap tbody tr").count() == 7
    assert page.locator("#heatmap td.cell").count() == 7 * 6
    assert page.locator("#heatmap td.self").count() == 7
    first, second = pool[0], pool[1]
    combined = api["explanation"]["members"][first]["similarity"][second]["combined"]
    assert page.locator("#heatmap tbody tr").nth(0).locator("td.cell").nth(0).inner_text() == f"{combined:.2f}"

    # A member's passages, opened from the keyboard; its answer is marked where the passage holds it.
    member = "BM25@3"
    summary = page.locator(f"#evidence details[data-member='{member}'] > summary")
    summary.focus()
    page.keyboard.press("Enter")
    passages = page.locator(f"#evidence details[data-member='{member}'] > ol > li")
    assert passages.count() == 3 and passages.nth(0).is_visible()
    titles = [passage["title"] for passage in api["members"][member]["passages"]]
    assert [passages.nth(i).locator(".passage-head").inner_text() for i in range(3)] == titles
    answer = api["members"][member]["answer"].strip().rstrip(".").lower()
    holding = [i for i in range(3) if answer in passages.nth(i).locator(".passage-text").inner_text().lower()]
    for i in range(3):
        marks = [m.lower() for m in passages.nth(i).locator("mark").all_inner_texts()]
        assert marks == ([answer] * len(marks) if i in holding else []), (i, marks)
        assert (i in holding) == bool(marks)
    assert holding, f"{member}'s answer {answer!r} is in none of its passages: nothing was highlighted"
    page.screenshot(path=str(shots / "explorer.png"), full_page=True)
    assert problems == []


def test_the_reports_view_lists_and_shows_a_report(browser, server, shots):
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    problems = _watch(page)
    page.goto(server + "/")
    page.click("#tab-reports")
    page.wait_for_function("() => document.getElementById('reports-status').textContent.includes('API key')")
    problems.clear()  # the 401
    assert page.evaluate("document.activeElement.id") == "api-key"
    page.keyboard.type(KEY)
    page.keyboard.press("Enter")
    button = page.locator("#report-list button", has_text="nq-dev")
    button.wait_for()
    assert "414 questions, 7 members" in page.inner_text("#report-list")
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("#report-frame:not([hidden])")
    frame = page.frame_locator("#report-frame")
    frame.locator("h1").wait_for()
    assert frame.locator("h1").inner_text() == "Retriever pool benchmark"
    images = frame.locator("img")
    assert images.count() == 5  # rwr, errors_rwr, upper_bound, error_rates and cost
    for i in range(5):
        images.nth(i).scroll_into_view_if_needed()
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0")
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(shots / "explorer-reports.png"))
    assert problems == []


def test_report_html_opens_with_no_network(browser, reports, shots):
    """Offline, every request refused: the page still shows every figure and table of report.md."""
    folder = reports / "nq-dev"
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    context = browser.new_context(offline=True, viewport={"width": 1200, "height": 1000})
    requested: list[str] = []

    def refuse(route) -> None:
        requested.append(route.request.url)
        route.continue_() if route.request.url.startswith(("file:", "data:")) else route.abort()

    context.route("**/*", refuse)
    page = context.new_page()
    page.goto((folder / "report.html").as_uri())
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    images = page.locator("img")
    assert images.count() == len(figures) == 5  # with cost.png
    assert [images.nth(i).get_attribute("alt") for i in range(5)] == figures
    for i in range(5):
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0"), figures[i]
    assert page.locator("table").count() == len(re.findall(r"^\|(---\|)+$", markdown, flags=re.M))
    assert [url for url in requested if not url.startswith("file:")] == []
    page.locator("h2", has_text="Figures").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "report.png"))
    context.close()


@pytest.fixture(scope="module")
def cascade_server(browser, tmp_path_factory) -> Iterator[str]:
    """`eor serve` of the default config answering with a hand cascade that stops after BM25@1 and holds a
    P(right) fitted beyond the corpus (tests.test_beyond_corpus): no threshold at an error rate of 0.2, so a risk
    of 0.25 declines, "not sure enough" or, for a question none of whose words the passage read holds, "not in
    the documents"."""
    import json

    from tests.test_beyond_corpus import beyond_section
    from tests.test_cascade import selector_document
    from tests.test_probability import THRESHOLDS

    folder = tmp_path_factory.mktemp("serve-cascade")
    members = ["ReFree", "PK", "BM25@1", "BM25@3", "Wiki@1", "Wiki@3", "BM25@2&Wiki@2"]
    order = ["BM25@1", *[name for name in members if name != "BM25@1"]]
    steps = [
        {
            "members": order[: j + 1],
            "calibration": {"intercept": 0.0, "top": 1.0, "margin": 0.0},
            "selector": selector_document(order[: j + 1], {"agreement": 1.0}, 0.0),
        }
        for j in range(len(order))
    ]
    point = {"threshold": 0.0, "accuracy": 0.5, "loss": 0.0, "cost": 1.0, "cost_p90": 1.0, "members_run": 1.0}
    document = {
        "format": "eor-voter-weights",
        "format_version": 1,
        "voter": "cascade",
        "members": members,
        "metrics": ["em"],
        "order": order,
        "threshold": 0.0,
        "steps": steps,
        "operating_points": [point],
        "chosen": point,
        "full_accuracy": 0.5,
        "full_cost": 7.0,
        "cost_unit": "seconds",
        "member_costs": {},
        "params": {"metrics": ["em"], "C": 1.0, "correctness": "em", "metric_params": None, "max_loss": 0.005},
        "meta": {"probability": beyond_section(THRESHOLDS)},
    }
    weights = folder / "cascade.json"
    weights.write_text(json.dumps(document))
    with serving(["--config", str(ROOT / "configs/default.yaml"), "--weights", str(weights)], folder) as base:
        yield base


def test_the_page_shows_p_right_and_an_abstention_plainly(browser, cascade_server, shots):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = _watch(page)
    page.goto(cascade_server + "/")
    page.wait_for_function("() => document.getElementById('pool').textContent.startsWith('7 members in the pool: ')")
    page.fill("#question", QUESTION)
    page.press("#question", "Enter")
    page.wait_for_selector("#results:not([hidden])", timeout=WAIT_MS)
    api = requests.post(f"{cascade_server}/v1/answer", json={"question": QUESTION}, timeout=600).json()
    assert page.inner_text("#answer strong") == api["answer"] and not api["abstained"]
    assert page.inner_text("#probability").startswith(f"P(right) {api['probability']:.2f}: the chance")
    assert api["probability_fit"] == "retrieval" and 'by its fit "retrieval"' in page.inner_text("#probability")

    page.fill("#risk", "0.25")  # the file's α 0.2 has no threshold: every question is declined
    page.press("#question", "Enter")
    page.wait_for_function("() => document.getElementById('answer').textContent.startsWith(\"I don't know\")")
    declined = requests.post(
        f"{cascade_server}/v1/answer", json={"question": QUESTION, "risk": 0.25}, timeout=600
    ).json()
    assert declined["abstained"] and declined["answer"] is None
    assert declined["abstention"]["kind"] == "not_sure"
    assert page.inner_text("#answer") == f"I don't know (not sure enough) — {declined['abstention']['reason']}"
    assert page.get_attribute("#answer", "data-kind") == "not_sure"
    note = page.inner_text("#answer-note")
    assert note.startswith(f"declined the answer of BM25@1: {declined['members']['BM25@1']['answer']}")
    assert "(the threshold for at most 0.2 wrong: none)" in page.inner_text("#probability")
    page.screenshot(path=str(shots / "explorer-abstention.png"), full_page=True)

    from tests.test_beyond_corpus import OUTSIDE

    page.fill("#question", OUTSIDE)
    page.press("#question", "Enter")
    page.wait_for_function("() => document.getElementById('answer').dataset.kind === 'not_in_documents'")
    outside = requests.post(f"{cascade_server}/v1/answer", json={"question": OUTSIDE, "risk": 0.25}, timeout=600).json()
    assert outside["abstained"] and outside["abstention"]["kind"] == "not_in_documents"
    assert page.inner_text("#answer") == (
        f"I don't know (your documents do not seem to hold this) — {outside['abstention']['reason']}"
    )
    page.screenshot(path=str(shots / "explorer-abstention-not-in-documents.png"), full_page=True)
    assert problems == []


@pytest.fixture(scope="module")
def documents_server(browser, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """`eor serve` over a folder of documents imported as the corpus (a two-page PDF and a Markdown file), with
    the folder named in the config (`corpus.documents`) and a bearer key: BM25@1 and SmolLM2."""
    from eor.documents.folder import import_folder
    from tests.test_documents import _pdf

    folder = tmp_path_factory.mktemp("serve-documents")
    root = folder / "papers"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n\nThe Mona Lisa was painted by Leonardo da Vinci.\n", encoding="utf-8")
    (root / "study.pdf").write_bytes(_pdf(["A page about rivers.", "The Mona Lisa hangs in the Louvre in Paris."]))
    import_folder(root, folder / "corpus.jsonl", progress=False)
    config = folder / "papers.yaml"
    config.write_text(
        f"""name: papers
reader: {{model: smollm2-135m, max_tokens: 16, llama_cpp: {{context_tokens: 2048}}}}
corpus: {{path: {folder / "corpus.jsonl"}, documents: {root}}}
members: [BM25@2]
voter: {{metrics: [em]}}
"""
    )
    with serving(["--config", str(config), "--api-key-env", "EOR_E2E_KEY"], folder, {"EOR_E2E_KEY": KEY}) as base:
        yield base, root


def test_a_passage_opens_the_document_it_comes_from_at_its_page(browser, documents_server, shots):
    base, root = documents_server
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = _watch(page)
    page.goto(base + "/")
    page.wait_for_function(
        "() => document.getElementById('pool').textContent.startsWith('One member in the pool: BM25@2')"
    )
    page.fill("#question", "in which paris museum does the mona lisa hang")
    page.press("#question", "Enter")  # the 401 opens the key box
    page.wait_for_function("() => document.getElementById('status').textContent.includes('API key')")
    problems.clear()  # the 401 itself is logged by the browser as a failed resource
    page.fill("#api-key", KEY)
    with page.expect_response(lambda r: r.url.endswith("/v1/answer"), timeout=WAIT_MS) as answered:
        page.press("#api-key", "Enter")
    body = answered.value.json()
    page.wait_for_selector("#results:not([hidden])", timeout=WAIT_MS)
    # the Sources block says what the API says: the passages that hold the answer, each with its sentence, then
    # those read only (SmolLM2's answer decides which is which)
    holding = [source for source in body["sources"] if source["holds"]]
    read = [source for source in body["sources"] if not source["holds"]]
    assert body["sources"] and page.locator("#sources li").count() == len(holding)
    for i, source in enumerate(holding):
        assert source["sentence"] in page.locator("#sources li").nth(i).inner_text()
    said = page.locator("#sources-read").inner_text()
    opening = "Read, not holding the answer: " if holding else "No passage read holds this answer. Read: "
    assert said.startswith(opening) if read else said == ""
    assert all(source["file"] in said for source in read)
    summary = page.locator("#evidence details[data-member='BM25@2'] > summary")
    summary.click()
    button = page.locator("#evidence details[data-member='BM25@2'] .document-link").first
    assert button.inner_text() == "study.pdf, page 2"  # the passage BM25 ranks first: the PDF's second page
    with page.context.expect_page() as opened, page.expect_response(lambda r: "/v1/documents/" in r.url) as got:
        button.click()
    response = got.value  # the file itself, fetched with the key
    assert response.url == f"{base}/v1/documents/study.pdf" and response.status == 200
    sent = response.all_headers()
    assert (
        sent["content-type"] == "application/pdf" and int(sent["content-length"]) == (root / "study.pdf").stat().st_size
    )
    document = opened.value  # opened from a blob of it, at the passage's page
    assert document.url.startswith("blob:") and document.url.endswith("#page=2")
    page.screenshot(path=str(shots / "explorer-documents.png"), full_page=True)
    assert [p for p in problems if "blob:" not in p] == []  # the document opens from a blob of this page
