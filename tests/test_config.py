from __future__ import annotations

from pathlib import Path

import pytest

from eor.core.config import EnsembleConfig, load_config
from eor.core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["default.yaml", "nq-offline.yaml"])
def test_shipped_configs_load(name: str) -> None:
    config = load_config(ROOT / "configs" / name)
    assert isinstance(config, EnsembleConfig)
    assert len(config.members) >= 6
    assert config.reader.model == "qwen2.5-0.5b"
    assert {"BM25", "Wiki", "PK", "ReFree"} <= {part for m in config.members for part in m.replace("&", "@").split("@")}


def test_paths_resolve_against_the_config_folder(tmp_path) -> None:
    config = load_config(write(tmp_path, "corpus: {path: data/c.jsonl}\nmembers: [ReFree]\n"))
    assert config.resolve_path(config.corpus.path) == tmp_path / "data" / "c.jsonl"
    assert config.to_dict()["corpus"]["path"] == str(tmp_path / "data" / "c.jsonl")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("members: [ReFree]\nreaderr: {}\n", r"unknown key\(s\) 'readerr'; valid keys: name, reader, corpus"),
        (
            "members: [ReFree]\nreader: {modell: x}\n",
            r"c.yaml.reader: unknown key\(s\) 'modell'; valid keys: model",
        ),
        ("members: [ReFree]\nreader: {max_tokens: many}\n", r"reader.max_tokens: expected int, got 'many'"),
        ("members: ReFree\n", "members: expected a list"),
        ("members: []\n", "'members' must list at least one"),
        ("members: [A, A]\n", "duplicates"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("members: [ReFree\n", "invalid YAML"),
        ("members: [ReFree]\nsources: {X: {type: bm25, paramz: {}}}\n", r"unknown key\(s\) 'paramz'"),
    ],
)
def test_bad_configs_fail_clearly(tmp_path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_missing_config_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.yaml")


def test_reader_options_live_in_their_backends_section(tmp_path) -> None:
    from eor.core.config import LlamaCppOptions, OpenAIOptions, ReaderConfig, TransformersOptions, from_dict

    config = from_dict(ReaderConfig, {"model": "m", "llama_cpp": {"threads": 2, "prefix_chunk": 128}}, "reader")
    assert config.llama_cpp == LlamaCppOptions(threads=2, prefix_chunk=128)
    # A config written before the sections: its flat keys move into them, so it still loads (and a run
    # begun with it still resumes: eor.commands.run_identity.same_run_config reads the saved config the same way).
    flat = {"model": "m", "threads": 2, "context_tokens": 2048, "base_url": "http://x", "batch_size": 4}
    migrated = from_dict(ReaderConfig, flat, "reader")
    assert migrated.llama_cpp == LlamaCppOptions(threads=2, context_tokens=2048)
    assert migrated.openai == OpenAIOptions(base_url="http://x") and migrated.transformers == TransformersOptions(4)
    with pytest.raises(ConfigError, match="threads is set twice, flat and in llama_cpp"):
        from_dict(ReaderConfig, {"threads": 1, "llama_cpp": {"threads": 2}}, "reader")
    with pytest.raises(ConfigError, match=r"reader.llama_cpp: unknown key\(s\) 'device'"):
        from_dict(ReaderConfig, {"llama_cpp": {"device": "cuda"}}, "reader")
    # An option for a backend that is not used is an error, never silently ignored.
    ReaderConfig(llama_cpp=LlamaCppOptions(threads=2)).check_sections("llama.cpp")
    with pytest.raises(ConfigError, match="reader.transformers is set, but the reader's backend is llama.cpp"):
        ReaderConfig(transformers=TransformersOptions(device="cuda")).check_sections("llama.cpp")
    with pytest.raises(ConfigError, match="reader.options is for a backend of another package"):
        ReaderConfig(options={"x": 1}).check_sections("openai")
    ReaderConfig(options={"x": 1}).check_sections("my-plugin-backend")


def test_build_reader_refuses_options_of_another_backend() -> None:
    from eor.core.config import ReaderConfig, TransformersOptions
    from eor.readers import build_reader

    with pytest.raises(ConfigError, match="reader.transformers is set, but the reader's backend is llama.cpp"):
        build_reader(ReaderConfig(model="smollm2-135m", transformers=TransformersOptions(batch_size=2)))
