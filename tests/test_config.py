from __future__ import annotations

from pathlib import Path

import pytest

from eor.config import EnsembleConfig, load_config
from eor.errors import ConfigError

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
