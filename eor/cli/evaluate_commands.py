"""`eor bench` (a pool's report from its records), `eor compare` (two reports side by side), `eor erag` (each
retrieved document labelled by the reader's answer with it alone) and `eor utility` (context utility against
0-shot)."""

from __future__ import annotations

from eor.cli.options import (
    Commands,
    batch_size_option,
    cache_options,
    config_option,
    data_option,
    executor_options,
    limit_option,
    member_option,
    out_option,
    positive_int,
    weights_option,
)


def add_bench(commands: Commands) -> None:
    bench = commands.add_parser("bench", help="benchmark a pool from its records: accuracy, RWR, errors, upper bound")
    bench.add_argument("records", help="run folder (or records.jsonl[.gz])")
    out_option(bench, "report folder: report.json, report.md, report.html and PNG figures")
    weights_option(bench, "for EoR (default: uniform)")
    bench.add_argument("--metric", default="em", help="correctness: em, f1, contains, semantic or bem (default em)")
    bench.add_argument(
        "--bem-model",
        metavar="ID_OR_PATH",
        help="the answer-equivalence classifier of --metric bem (a Hugging Face id in the local cache, or a folder)",
    )
    bench.add_argument("--metrics", help="similarity metrics of the uniform voter, comma-separated")
    bench.add_argument(
        "--config", help="benchmark this config's members of the records only (records that grew beyond its pool)"
    )
    bench.add_argument(
        "--design", help="eor design's design.json (or its folder): its candidates, path and frontier in the report"
    )
    bench.add_argument("--seed", type=int, default=0, help="seed of bootstrap and subset sampling")
    bench.add_argument("--resamples", type=positive_int, default=1000, help="bootstrap resamples (default 1000)")
    bench.add_argument(
        "--max-subsets", type=positive_int, default=1000, help="member subsets per pool size (upper bound)"
    )
    bench.add_argument(
        "--against",
        metavar="WEIGHTS",
        help="with a judge voter's --weights: another weights file's voter on the same records, paired with it",
    )
    bench.add_argument(
        "--frontier",
        action="store_true",
        help="also the accuracy-cost frontier of member subsets (a selector cross-validated per subset)",
    )
    bench.set_defaults(handler="eor.cli.handlers.bench:cmd_bench")


def add_compare(commands: Commands) -> None:
    compare = commands.add_parser("compare", help="print the differences between two bench reports")
    compare.add_argument("report_a", help="report folder or report.json")
    compare.add_argument("report_b", help="report folder or report.json")
    compare.add_argument("--html", metavar="FILE", help="also write the comparison as one self-contained HTML page")
    compare.set_defaults(handler="eor.cli.handlers.bench:cmd_compare")


def add_erag(commands: Commands) -> None:
    erag = commands.add_parser(
        "erag", help="eRAG: label each retrieved document by the reader's answer with it alone; correlate with e2e"
    )
    config_option(erag, holds=": reader, corpus, sources")
    data_option(erag, "'answers' [, 'gold_passages']")
    member_option(erag, "the retriever to evaluate")
    out_option(erag, "folder: erag.json, erag.md, erag.html, erag.png (re-run to resume)")
    erag.add_argument("--k", type=positive_int, default=10, help="documents per question (default 10)")
    erag.add_argument("--metric", default="em", help="downstream metric: em, f1 or contains (default em)")
    limit_option(erag)
    erag.add_argument("--cutoffs", help="cutoffs of the correlation-vs-k figure (default 1,2,3,5,10 up to k)")
    erag.add_argument(
        "--cost-questions",
        type=int,
        default=10,
        help="questions of the side-by-side cost measurement of eRAG vs end-to-end (default 10; 0: off)",
    )
    batch_size_option(erag)
    executor_options(erag)
    cache_options(erag)
    erag.set_defaults(handler="eor.cli.handlers.erag:cmd_erag")


def add_utility(commands: Commands) -> None:
    utility = commands.add_parser(
        "utility", help="context utility U of the top-k documents vs 0-shot, and its Pearson r with nDCG@k"
    )
    config_option(utility, holds=": reader, corpus, sources")
    data_option(utility, "'answers' [, 'gold_passages']")
    member_option(utility, "the retriever whose contexts are scored")
    out_option(utility, "folder: utility.json, utility.md, utility.html, utility.png")
    utility.add_argument("--ks", default="1,2,5,10", help="context sizes, comma-separated (default 1,2,5,10)")
    utility.add_argument(
        "--similarity", default="bertscore", help="similarity of answer and reference (default bertscore)"
    )
    utility.add_argument(
        "--references", default="answers", help="compare answers with the gold 'answers' (default) or gold 'passages'"
    )
    limit_option(utility)
    utility.add_argument(
        "--epsilon", type=float, help="divide by max(P(0-shot), EPSILON) instead of leaving U undefined"
    )
    batch_size_option(utility)
    executor_options(utility)
    cache_options(utility)
    utility.set_defaults(handler="eor.cli.handlers.erag:cmd_utility")
