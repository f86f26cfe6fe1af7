"""The explorer: a page at `/` to ask a question and see every member's answer, evidence and vote, and the
benchmark reports of `--reports DIR`.

The page is three files shipped in `eor/server/explorer_page/` (HTML, script, style) and served by eor itself,
with a Content-Security-Policy that lets it load nothing from anywhere else. It asks through the same
`/v1` API as any client (`POST /v1/answer` with passages and the vote's explanation), so it sends the
bearer key when the server has one; so do the two report routes:

- `GET /v1/reports`: the reports found under DIR, with their headline figures;
- `GET /v1/reports/{name}`: one report as a self-contained HTML page (eor.evaluation.writing.html).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response

from eor.evaluation.writing.html import report_html
from eor.server.http_errors import ApiError
from eor.server.reports import find_report, find_reports
from eor.server.schemas import ErrorBody, ReportList
from eor.server.settings import ServerSettings

ASSETS = {"explorer.js": "text/javascript; charset=utf-8", "explorer.css": "text/css; charset=utf-8"}
# Inline style is allowed for the reports shown in a sandboxed frame (they inherit this policy); the page's
# own script and style come from eor only, images from eor or data: URIs (the reports' figures).
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {"Content-Security-Policy": POLICY, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


def _asset(name: str) -> str:
    return resources.files("eor.server").joinpath("explorer_page", name).read_text(encoding="utf-8")


def add_explorer(app: FastAPI, settings: ServerSettings, dependencies: list[Any]) -> None:
    """Add the page, its assets and the report routes to `app`; `dependencies` guard the report routes."""
    page = _asset("index.html")
    assets = {name: _asset(name) for name in ASSETS}

    @app.get("/", include_in_schema=False)
    async def explorer() -> HTMLResponse:
        return HTMLResponse(page, headers=HEADERS)

    @app.get("/explorer/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in assets:
            raise ApiError(404, "not_found", f"no explorer file {name!r}")
        return Response(assets[name], media_type=ASSETS[name], headers=HEADERS)

    errors: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 404)}

    @app.get(
        "/v1/reports",
        response_model=ReportList,
        responses=errors,
        dependencies=dependencies,
        tags=["reports"],
        summary="The benchmark reports under the server's --reports folder",
    )
    async def list_reports() -> JSONResponse:
        root = _root(settings)
        return JSONResponse({"reports": [entry.summary() for entry in find_reports(root)]})

    @app.get(
        "/v1/reports/{name:path}",
        response_class=HTMLResponse,
        responses=errors,
        dependencies=dependencies,
        tags=["reports"],
        summary="One benchmark report as a self-contained HTML page (figures embedded)",
    )
    async def show_report(name: str) -> HTMLResponse:
        entry = find_report(_root(settings), name)
        if entry is None:
            raise ApiError(404, "report_not_found", f"no report named {name!r}; GET /v1/reports lists them")
        return HTMLResponse(report_html(entry.folder), headers=HEADERS)


def _root(settings: ServerSettings) -> Path:
    """The server's reports folder; 404 `reports_disabled` when it has none."""
    if settings.reports is None:
        raise ApiError(404, "reports_disabled", "this server lists no reports: start it with --reports DIR")
    return settings.reports
