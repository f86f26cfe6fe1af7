"""`GET /v1/documents/{file}`: the files of the folder a corpus was imported from (`corpus.documents`; eor
import-corpus FOLDER), so that the explorer links each passage to its file and page.

Only a file the corpus's manifest lists is served (eor.documents.folder: a path relative to the folder, as
passages cite it), from inside that folder, behind the API key like every /v1 route. An HTML file is served in
a sandbox (its scripts never run, it gets no origin of eor's), every file with `nosniff`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse

from eor.core.config import EnsembleConfig
from eor.documents.folder import manifest_path
from eor.server.http_errors import ApiError
from eor.server.schemas import ErrorBody

MEDIA = {
    ".pdf": "application/pdf",
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".md": "text/markdown; charset=utf-8",
    ".markdown": "text/markdown; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".text": "text/plain; charset=utf-8",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}
HEADERS = {
    "Content-Security-Policy": "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
}


@dataclass(frozen=True)
class DocumentFolder:
    """The imported folder and its manifest (read at each request: a corpus imported again is served anew)."""

    folder: Path
    manifest: Path

    @classmethod
    def of(cls, config: EnsembleConfig) -> DocumentFolder | None:
        """The folder a config's corpus was imported from (`corpus.documents`), or None."""
        corpus = config.corpus
        if corpus is None or not corpus.documents:
            return None
        return cls(config.resolve_path(corpus.documents), manifest_path(config.resolve_path(corpus.path)))

    def file(self, relative: str) -> Path:
        """The file a passage cites; ApiError 404 unless the manifest lists it and it lies in the folder."""
        try:
            listed = json.loads(self.manifest.read_text(encoding="utf-8")).get("files") or {}
        except (OSError, json.JSONDecodeError):
            listed = {}
        path = (self.folder / relative).resolve()
        if relative not in listed or not path.is_relative_to(self.folder.resolve()) or not path.is_file():
            raise ApiError(404, "document_not_found", f"no imported document {relative!r}")
        return path


def add_document_route(app: FastAPI, documents: DocumentFolder | None, dependencies: list[Any]) -> None:
    """Serve the imported folder's files (404 for every file when the config names no folder)."""
    errors: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 404)}

    @app.get(
        "/v1/documents/{file:path}",
        response_class=FileResponse,
        responses=errors,
        dependencies=dependencies,
        tags=["documents"],
        summary="A file of the folder the corpus was imported from, as passages cite it",
    )
    async def document(file: str) -> FileResponse:
        if documents is None:
            raise ApiError(
                404, "document_not_found", "this server's config names no imported folder (corpus.documents)"
            )
        path = documents.file(file)
        return FileResponse(
            path, media_type=MEDIA.get(path.suffix.lower(), "application/octet-stream"), headers=HEADERS
        )
