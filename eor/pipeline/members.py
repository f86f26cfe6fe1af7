"""Members from a config, in one place: the pool of the config's sources over which every member's retriever
tree is built, with the config's prompt templates and the reader's generation stage. The ensemble, eRAG
and utility all build their members here, so a member reads the same documents under the same prompts
wherever it runs.
"""

from __future__ import annotations

from typing import Any

from eor.core.config import EnsembleConfig
from eor.core.errors import InputError
from eor.core.prompts import PromptTemplates, templates_for
from retrievers import notation


def source_pool(
    config: EnsembleConfig, generation: Any, *, templates: PromptTemplates | None = None, depth: int | None = None
) -> Any:
    """The config's `retrievers.registry.SourcePool`: `pool.build("BM25@3")` is member BM25@3's retriever.
    `generation`: the reader, through its generation stage (PK's documents and @CP's summaries are
    generations); `depth`: passages retrieved per query (default: the config's `retrieval_depth`)."""
    from retrievers.registry import BuildContext, SourcePool

    corpus = config.resolve_path(config.corpus.path) if config.corpus and config.corpus.path else None
    context = BuildContext(
        corpus_path=str(corpus) if corpus else None,
        reader=generation,
        prompts=templates or templates_for(config),
        depth=depth if depth is not None else config.retrieval_depth,
        encoder=config.voter.encoder,
        parametric_max_tokens=config.prompts.parametric_max_tokens,
        compression_max_tokens=config.prompts.compression_max_tokens,
        rrf_k=config.rrf_k,
    )
    return SourcePool(context, {name: (spec.type, spec.params) for name, spec in config.sources.items()})


def member_templates(config: EnsembleConfig, members: list[str] | None = None) -> dict[str, PromptTemplates]:
    """Each member's answer-prompt templates: the config's, or those of the prompt variant its name ends with
    (`Wiki@1:fewshot`: `prompts.variants.fewshot`); ConfigError for a variant the config lacks."""
    base = templates_for(config)
    found = {}
    for name in config.members if members is None else members:
        variant = notation.variant_of(notation.parse(name))
        found[name] = base if variant is None else templates_for(config, variant)
    return found


def demonstration_ids(config: EnsembleConfig) -> set[str]:
    """The ids of the questions the config's prompt variants show as worked examples: left out wherever
    the config's records train or score anything."""
    return {demo.id for variant in config.prompts.variants.values() for demo in variant.demonstrations if demo.id}


def member_list(text: str) -> list[str]:
    """`--members A,B` as a list of names (a name holds no comma: the notation has none)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise InputError("--members: name at least one member, e.g. --members BM25@3,Wiki@1")
    return names
