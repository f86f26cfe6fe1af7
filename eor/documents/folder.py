"""A folder of documents as a corpus file, kept current: `import_folder(folder, corpus)`.

The folder is walked recursively in a fixed order (relative paths, `/`-separated, sorted), files kept by
include and exclude globs (matched on the relative path; `**` crosses folders). Each file is read by its format
(eor.documents.extract) and split into passages (eor.documents.split); the corpus is JSON Lines (`id`, `title`,
`text`, and the passage's `file`, `page`, `heading`, `start`, `end`), in path order, then reading order.

**Kept current.** Beside the corpus, `<corpus>.manifest.json` records each file's content digest and its
passage count. Imported again, a file whose digest is unchanged keeps its passages as they are (read back from
the corpus, never extracted again), a changed file's passages are replaced, a removed file's dropped, a new
file's added: the corpus is the same, byte for byte, as an import of the folder into an empty place. Whether a
file changed is decided by its content, never its modification time.

**Bad input is told, not fatal.** A file that cannot be read (encrypted, damaged, an unknown format that is not
text, unreadable, over `max_bytes`) is skipped with one warning naming it and why; a page without text, an empty
file and a file read as plain text for want of a reader are warned of; the rest is imported. The summary names
the files added, changed, removed and skipped. The corpus and the manifest are replaced atomically (a temporary
file renamed over the old one), so a kill or a full disk leaves the previous corpus whole; an import of which no
passage could be read writes nothing, leaving the previous corpus as it was.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eor.core.atomic import write_text_atomically
from eor.core.errors import InputError
from eor.documents.extract import DocumentError, extract
from eor.documents.split import DEFAULT_WORDS, file_digest, passage_id, split_document

MANIFEST_FORMAT = "eor-documents-manifest"
MANIFEST_VERSION = 1
#: files over this size are skipped (a warning says so): 100 MB
DEFAULT_MAX_BYTES = 100 * 2**20


#: how many file names a summary line lists before "and N more"
NAMED = 10


@dataclass
class ImportSummary:
    """What an import did: files by fate, passages written, and a warning per file (or page) skipped."""

    corpus: Path
    added: list[str] = field(default_factory=list)  # extracted: new since the previous import
    changed: list[str] = field(default_factory=list)  # extracted: their content changed
    kept: list[str] = field(default_factory=list)  # unchanged: passages kept
    removed: list[str] = field(default_factory=list)  # in the previous import, gone from the folder
    skipped: dict[str, str] = field(default_factory=dict)  # relative path -> why
    warnings: list[str] = field(default_factory=list)  # one line each: `path: what` (files and pages)
    passages: int = 0

    @property
    def read(self) -> list[str]:
        """The files extracted (added or changed), in path order."""
        return sorted(self.added + self.changed)

    def lines(self) -> list[str]:
        parts = [f"{len(self.read)} read", f"{len(self.kept)} unchanged", f"{len(self.removed)} removed"]
        parts.append(f"{len(self.skipped)} skipped")
        if not self.passages:  # import_folder writes nothing then: the corpus there stays as it was
            head = f"no passage could be read: nothing written, {self.corpus} left as it was"
            lines = [f"{head} ({', '.join(parts)} files)"]
        else:
            lines = [f"{self.passages} passages written to {self.corpus} ({', '.join(parts)} files)"]
        named = [("added", self.added), ("changed", self.changed), ("removed", self.removed)]
        named.append(("skipped", list(self.skipped)))
        lines += [f"  {what}: {names_line(paths)}" for what, paths in named if paths]
        return lines


def names_line(paths: Sequence[str]) -> str:
    """The first NAMED paths, comma-separated, and how many more there are."""
    shown = ", ".join(paths[:NAMED])
    return shown + (f" and {len(paths) - NAMED} more" if len(paths) > NAMED else "")


def import_folder(
    folder: str | Path,
    corpus: str | Path,
    *,
    include: Sequence[str] = ("**",),
    exclude: Sequence[str] = (),
    words: int = DEFAULT_WORDS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    warn: Callable[[str], None] | None = None,
    progress: bool = True,
    readers: Mapping[str, str] | None = None,
) -> ImportSummary:
    """Import the documents of `folder` into the corpus file `corpus` (see the module); a single file is imported
    as a folder of one (its passages name it alone). `warn` gets each warning line as it happens; `readers` maps
    a file suffix to a format (eor.documents.extract.FORMATS)."""
    source = Path(folder)
    out = Path(corpus)
    if source.is_file():
        root, paths = source.parent, [source.name]
    elif source.is_dir():
        # the corpus and its manifest, when they are inside the folder, are what this writes, never a document
        own = {path.resolve() for path in (out, manifest_path(out))}
        root, paths = source, [p for p in walk(source, include, exclude) if (source / p).resolve() not in own]
    else:
        raise InputError(f"{source}: no such folder or file")
    summary = ImportSummary(out)
    previous = _previous(out, words)
    kept_lines = _lines_by_file(out) if previous else {}
    files: dict[str, dict[str, Any]] = {}
    lines: list[str] = []
    for relative in _progress(paths, progress):
        old = previous.get(relative)
        found = _file_lines(root, relative, old, kept_lines.get(relative), words, max_bytes, readers)
        if isinstance(found, str):
            summary.skipped[relative] = found
            _warn(summary, f"{relative}: skipped, {found}", warn)
            continue
        digest, file_lines, problems = found
        fate = summary.kept if problems is None else summary.added if old is None else summary.changed
        fate.append(relative)
        for problem in problems or ():
            _warn(summary, f"{relative}: {problem}", warn)
        files[relative] = {"digest": digest, "passages": len(file_lines)}
        lines += file_lines
    summary.removed = sorted(set(previous) - set(files))
    summary.passages = len(lines)
    if lines:  # a folder of which nothing could be read never replaces a corpus (a folder of scans, a typo)
        _write(out, lines, {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "words": words, "files": files})
    return summary


def _file_lines(
    root: Path,
    relative: str,
    old: dict[str, Any] | None,
    kept: list[str] | None,
    words: int,
    max_bytes: int,
    readers: Mapping[str, str] | None = None,
) -> tuple[str, list[str], list[str] | None] | str:
    """A file's (content digest, corpus lines, warnings: None when its previous lines were kept), or why it is
    skipped; a file without text (empty) is read, with a warning."""
    path = root / relative
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return f"{size} bytes, over the limit of {max_bytes}"
        data = path.read_bytes()
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    digest = file_digest(data)
    reused = _reused(kept, relative, digest, old)
    if reused is not None:
        return digest, reused, None
    try:
        document = extract(path, data, readers)
    except DocumentError as exc:
        return str(exc).removeprefix(f"{path}: ")
    passages = split_document(document, relative, digest, words)
    problems = list(document.warnings)
    if not passages and not problems:
        problems.append("empty: no text to read" if not data.strip() else "no text to read")
    return digest, [json.dumps(p.to_dict(), ensure_ascii=False) for p in passages], problems


def walk(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The relative paths (`/`-separated, sorted) of the files under `root` that an include glob matches and no
    exclude glob does; hidden files and folders (a name starting with `.`) are left out."""
    found = []
    for directory, folders, names in os.walk(root):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        base = Path(directory).relative_to(root)
        for name in names:
            if name.startswith("."):
                continue
            relative = (base / name).as_posix()
            if _matches(relative, include) and not _matches(relative, exclude):
                found.append(relative)
    return sorted(found)


def _matches(relative: str, globs: Iterable[str]) -> bool:
    """Whether a glob matches the relative path (`**` any folders, `*` within a name) or, for a glob without a
    `/`, the file name."""
    for glob in globs:
        if glob in ("**", "**/*") or fnmatch.fnmatchcase(relative, glob):
            return True
        if "/" not in glob and fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], glob):
            return True
        if glob.startswith("**/") and fnmatch.fnmatchcase(relative, glob[3:]):
            return True
    return False


def manifest_path(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".manifest.json")


def _previous(corpus: Path, words: int) -> dict[str, dict[str, Any]]:
    """The files of the previous import into `corpus` (none when there is none, or it split otherwise)."""
    path = manifest_path(corpus)
    if not path.is_file() or not corpus.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    if manifest.get("format") != MANIFEST_FORMAT or manifest.get("words") != words:
        return {}
    return dict(manifest.get("files") or {})


def _lines_by_file(corpus: Path) -> dict[str, list[str]]:
    """The previous corpus's lines, by the file they came from."""
    out: dict[str, list[str]] = {}
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                file = json.loads(line).get("file")
                out.setdefault(str(file), []).append(line.rstrip("\n"))
    return out


def _reused(lines: list[str] | None, relative: str, digest: str, old: dict[str, Any] | None) -> list[str] | None:
    """The previous lines of an unchanged file, if they are exactly its passages (their ids say so; a file
    without passages, an image-only PDF, has none to check)."""
    if old is None or old.get("digest") != digest:
        return None
    lines = lines or []
    if len(lines) != old.get("passages"):
        return None
    ids = [json.loads(line).get("id") for line in lines]
    return lines if ids == [passage_id(relative, digest, i) for i in range(len(lines))] else None


def _write(corpus: Path, lines: list[str], manifest: dict[str, Any]) -> None:
    """The corpus, then its manifest, each replaced atomically (the manifest last: a kill between the two
    leaves a manifest whose ids do not match, so the next import reads those files again)."""
    corpus.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(corpus, "".join(line + "\n" for line in lines))
    write_text_atomically(manifest_path(corpus), json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def _warn(summary: ImportSummary, line: str, warn: Callable[[str], None] | None) -> None:
    summary.warnings.append(line)
    if warn is not None:
        warn(line)


def _progress(paths: list[str], show: bool) -> Iterable[str]:
    if not show:
        return paths
    from tqdm.auto import tqdm

    return tqdm(paths, desc="documents", unit="file")
