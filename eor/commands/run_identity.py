"""Which run a folder holds, for `eor run` (eor.commands.runner): its saved config and its pool's identity, and
whether this config starts it, resumes it or grows it by members.

A config that names every member of the folder's run and more grows its records; a config of the same members
resumes them, even when its corpus file lies elsewhere (records unpacked from a packed file name the corpus file
alone) or its name differs. A config that changes anything behind a recorded member (eor.pipeline.pool.
member_identity: the corpus, the reader, the prompts, a source's parameters, an encoder) is refused, naming the
member and the difference, and so is one that drops a recorded member.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from eor.core.config import EnsembleConfig, from_dict
from eor.core.errors import ConfigError, InputError
from eor.pipeline.pool import identity_differences, member_identity
from eor.runs.run_folder import CONFIG_FILE, POOL_FILE, RunFolder

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RecordedRun:
    """What a run folder's records were made with: its config (as saved) and its pool's identity."""

    config: EnsembleConfig
    pool: dict[str, Any]


def recorded_run(folder: RunFolder, config: EnsembleConfig, weights: str | None) -> RecordedRun | None:
    """The folder's recorded run when its records may grow by this config's members, else None (a new folder,
    or a resumed run of the same config whose records hold every member).

    Records grow when this config names more members than the recorded run, or the same config's growth was
    interrupted (some record still lacks a member). A config of the same members that differs only in where
    its corpus lies (records unpacked from a packed file name the corpus file alone) or in its name resumes
    them once their identity is checked. Any other change is refused, as is growing records without the config and pool
    they were made with (nothing would show that their members are this config's)."""
    out, saved = folder.path, folder.file(CONFIG_FILE)
    members = set(config.members)
    if not folder.has(CONFIG_FILE):
        if any(set(r.members) | set(r.degraded) != members for r in folder.iter_records()):
            raise InputError(
                f"{out} holds records of other members and no {CONFIG_FILE}: unpack packed records with "
                f"`eor records unpack FILE --out {out}`, which keeps the config and pool they were made with"
            )
        return None
    data = folder.read_config()
    lacking = any(members - set(r.members) - set(r.degraded) for r in folder.iter_records())
    same = same_run_config(data, resolved_config(config, weights))
    if same and not lacking:
        return None
    data = dict(data)
    data.pop("weights", None)
    try:
        recorded = from_dict(EnsembleConfig, data, str(saved))
    except ConfigError as exc:
        raise InputError(f"{out} holds a run of a config this eor cannot read ({exc}); choose another --out") from None
    grows = members > set(recorded.members)
    if members - set(recorded.members) and not grows:  # new members, but some recorded ones left out
        dropped = ", ".join(name for name in recorded.members if name not in members)
        raise InputError(
            f"{out} holds a run of a different config: the records hold member(s) {dropped} that this config "
            "lacks; records grow by members, so name every recorded member in the config, or choose another --out"
        )
    if not (grows or (same and lacking) or _same_but_corpus_path(recorded, config)):
        differ = differing(folder.read_config(), resolved_config(config, weights))
        raise InputError(f"{out} holds a run of a different config ({differ}); choose another --out")
    if not folder.has(POOL_FILE):
        raise InputError(f"{out} has no {POOL_FILE}: the identity of its records' pool is unknown, so they cannot grow")
    return RecordedRun(recorded, folder.read_pool())


def _same_but_corpus_path(recorded: EnsembleConfig, config: EnsembleConfig) -> bool:
    """Whether two configs are the same but for the folder of their corpus file (its identity is checked) and
    their name (a label: nothing a record holds depends on it)."""

    def normalised(one: EnsembleConfig) -> dict[str, Any]:
        data = one.to_dict()
        data.pop("name")
        data.pop("judge", None)  # scores grow the records of the same run (eor.commands.judge_records)
        if data.get("corpus") and data["corpus"].get("path"):
            data["corpus"]["path"] = Path(data["corpus"]["path"]).name
        return data

    return normalised(recorded) == normalised(config)


def resolved_config(config: EnsembleConfig, weights: str | None) -> dict[str, Any]:
    """The config a run folder saves: the config's own fields and the weights file's full path (or None)."""
    return {**config.to_dict(), "weights": str(Path(weights).resolve()) if weights else None}


def save_config(folder: RunFolder, config: EnsembleConfig, weights: str | None, *, replace: bool = False) -> None:
    """The run's resolved config in the folder; a folder that holds a run of another config is refused (unless
    `replace`: records that grew by the config's new members)."""
    resolved = resolved_config(config, weights)
    if not replace and folder.has(CONFIG_FILE) and not same_run_config(folder.read_config(), resolved):
        raise InputError(
            f"{folder.path} holds a run of a different config ({differing(folder.read_config(), resolved)}); choose "
            "another --out"
        )
    folder.write_config(resolved)


def lacking_members(folder: RunFolder, config: EnsembleConfig) -> bool:
    """Whether some record lacks a member of the config (neither answered nor failed)."""
    return any(set(config.members) - set(r.members) - set(r.degraded) for r in folder.iter_records())


def check_growth(recorded: RecordedRun, config: EnsembleConfig, pool: dict[str, Any]) -> None:
    """InputError unless `config` keeps every recorded member as it was made (eor.pipeline.pool.member_identity)."""
    dropped = [name for name in recorded.config.members if name not in config.members]
    if dropped:
        raise InputError(
            f"the records hold member(s) {', '.join(dropped)} that this config lacks: records grow by members, "
            "so name every recorded member in the config (and choose a pool from the records with --members)"
        )
    made = dict(recorded.pool)
    if made.get("reader") == recorded.config.reader.model != pool.get("reader"):
        # pool.json written without a built reader (a Ray run, or one with nothing to answer) names the model alone
        log.warning(
            "the records name their reader by its model alone (%s); taken as %s", made["reader"], pool["reader"]
        )
        made["reader"] = pool.get("reader")
    for name in recorded.config.members:
        found = identity_differences(member_identity(recorded.config, name, made), member_identity(config, name, pool))
        if found:
            raise InputError(
                f"member {name} of the records was made differently from this config's: {'; '.join(found)}. "
                "Records grow only by new members over the same corpus, reader, prompts and sources: run this "
                "config into another --out"
            )


def same_run_config(saved: Any, resolved: dict[str, Any]) -> bool:
    """Whether a run folder's saved config is this run's. Both are read through the config schema first, so a
    field that a newer eor added with its default (a run begun before an upgrade) does not count as a change."""
    if saved == resolved:
        return True
    if not isinstance(saved, dict):
        return False
    saved = dict(saved)
    saved.pop("judge", None)  # scores grow the records of the same run (eor.commands.judge_records)
    resolved = {key: value for key, value in resolved.items() if key != "judge"}
    weights = saved.pop("weights", None)
    try:
        normalised = from_dict(EnsembleConfig, saved, CONFIG_FILE).to_dict()
    except ConfigError:  # written by another version with keys this one lacks: not provably the same
        return False
    return {**normalised, "weights": weights} == resolved


def differing(recorded: dict[str, Any], resolved: dict[str, Any]) -> str:
    """Where a run folder's saved config and this run's resolved one (`resolved_config`) differ, in words: the
    dotted paths of the values that differ (`reader.llama_cpp.context_tokens`)."""

    def paths(old: Any, new: Any, at: str) -> list[str]:
        if old == new:
            return []
        if isinstance(old, dict) and isinstance(new, dict):
            keys = sorted(set(old) | set(new))
            return [path for key in keys for path in paths(old.get(key), new.get(key), f"{at}{key}.")]
        return [at.rstrip(".")]

    names = paths(recorded, resolved, "")
    return "it differs in " + ", ".join(names) if names else "saved by another eor"
