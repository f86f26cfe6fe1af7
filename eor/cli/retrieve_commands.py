"""The parser of `eor retrieve` (retrieval alone, no reader); what it does is eor.cli.handlers.retrieve's."""

from __future__ import annotations

from eor.cli.options import Commands, positive_int


def add_parser(commands: Commands) -> None:
    retrieve = commands.add_parser(
        "retrieve", help="retrieval only (no reader): top passages with ids, scores and sources, with timings"
    )
    retrieve.add_argument("question", nargs="?", help="the question, in quotes (or --questions FILE)")
    retrieve.add_argument(
        "--questions", metavar="FILE", help="a question file (JSON Lines with `question`), asked one at a time"
    )
    retrieve.add_argument(
        "--members",
        metavar="A,B,...",
        default="BM25",
        help="members in the paper's notation, comma-separated (default: BM25); the reader's members (PK, @CP) "
        "are refused",
    )
    retrieve.add_argument("-k", "--top", type=positive_int, default=10, help="passages shown per member (default 10)")
    retrieve.add_argument("--json", action="store_true", help="JSON Lines: one line per question and member")
    retrieve.add_argument("--config", metavar="CONFIG", help="the config whose corpus and sources to search")
    retrieve.set_defaults(handler="eor.cli.handlers.retrieve:run")
