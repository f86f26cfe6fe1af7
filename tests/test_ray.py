"""`--executor ray` (eor.pipeline.executor, eor.pipeline.ray_executor) on a local Ray cluster of 2 CPUs started here:
`eor run` writes the records of the local executor (apart from timings), a killed worker is restarted and its shard
run again, a killed driver resumes on re-run, and `eor erag` labels the same documents the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eor.runs.records import read_records
from tests.conftest import DEMO, ROOT

ray = pytest.importorskip("ray")

QUESTIONS = DEMO / "questions.jsonl"
CONFIG = {
    "reader": {"model": "smollm2-135m", "max_tokens": 16},
    "corpus": {"path": str(DEMO / "corpus.jsonl")},
    "members": ["ReFree", "BM25@1", "BM25@3"],
    "voter": {"metrics": ["em", "f1"]},
    "batch_size": 2,
}


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs; the commands below join it with --ray-address."""
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield context.address_info["gcs_address"]
    ray.shutdown()


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ray") / "config.yaml"
    path.write_text(json.dumps(CONFIG))
    return path


@pytest.fixture(scope="module")
def local_timed(config, tmp_path_factory) -> tuple[Path, float]:
    """The reference: 12 questions answered by the local executor, and the seconds that took on this machine."""
    from eor.commands.runner import run

    out = tmp_path_factory.mktemp("local") / "run"
    started = time.monotonic()
    run(config, QUESTIONS, out, limit=12, cache=False)
    return out, time.monotonic() - started


@pytest.fixture(scope="module")
def local_run(local_timed) -> Path:
    return local_timed[0]


@pytest.fixture(scope="module")
def patience(local_timed) -> float:
    """Seconds one command below may take, from the local run's measured time, so the waits hold on a slow or busy
    machine: a Ray command does the same generations in 2 worker processes that each load the reader and share the
    cores, and Ray starts up first (beside a CPU-bound job: 12.7 s a question locally, about 41 s on Ray)."""
    return 120 + 8 * local_timed[1]


def _eor(*args: str, env_cache: Path) -> subprocess.Popen:
    env = {**os.environ, "EOR_CACHE": str(env_cache)}
    return subprocess.Popen(
        [sys.executable, "-m", "eor.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _ray_run(config: Path, out: Path, address: str, cache: Path, *extra: str, cached: bool = False) -> subprocess.Popen:
    return _eor(
        "run",
        "--config",
        str(config),
        "--data",
        str(QUESTIONS),
        "--out",
        str(out),
        "--limit",
        "12",
        *([] if cached else ["--no-cache"]),
        "--executor",
        "ray",
        "--ray-address",
        address,
        "--shard-batches",
        "1",
        *extra,
        env_cache=cache,
    )


def _without_timings(folder: Path) -> list[dict]:
    records = [record.to_dict() for record in read_records(folder)]
    for record in records:
        for output in record["members"].values():
            output.pop("seconds", None)
            output.pop("tokens", None)
    return records


def _wait_for_records(out: Path, process: subprocess.Popen, seconds: float, count: int = 1) -> int:
    deadline = time.monotonic() + seconds
    written = out / "records.jsonl"
    while time.monotonic() < deadline and process.poll() is None:
        if written.exists() and written.read_text().count("\n") >= count:
            return written.read_text().count("\n")
        time.sleep(0.05)
    raise AssertionError(f"no {count} records within {seconds} s (exit {process.poll()})")


def _shard_workers() -> list[int]:
    """PIDs of the processes of Ray's ShardWorker actors (Ray names an actor's process after its class)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="ignore")
            except OSError:
                continue
            if "ray::ShardWorker" in command:
                pids.append(int(entry.name))
    return pids


def test_ray_writes_the_records_of_the_local_executor(cluster, config, local_run, tmp_path, patience) -> None:
    out = tmp_path / "ray"
    process = _ray_run(config, out, cluster, tmp_path / "cache")
    stdout, stderr = process.communicate(timeout=patience)
    assert process.returncode == 0, stderr[-3000:]
    assert "12 questions in" in stdout and "(summed over the Ray workers)" in stdout
    assert _without_timings(out) == _without_timings(local_run)  # same records, same order
    ray_stats = json.loads((out / "generation.json").read_text())
    local_stats = json.loads((local_run / "generation.json").read_text())
    assert ray_stats["generated"] == local_stats["generated"] == 36  # 12 questions × 3 members


def test_a_killed_worker_is_restarted_to_the_same_records(cluster, config, local_run, tmp_path, patience) -> None:
    out = tmp_path / "ray"
    process = _ray_run(config, out, cluster, tmp_path / "cache")
    done = _wait_for_records(out, process, patience)
    workers = _shard_workers()
    assert workers, "no ShardWorker process found"
    os.kill(workers[0], signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=patience)
    assert process.returncode == 0, stderr[-3000:]
    assert done < 12, "the worker was killed after the run"
    assert _without_timings(out) == _without_timings(local_run)


def test_a_killed_run_resumes_to_the_same_records(cluster, config, local_run, tmp_path, patience) -> None:
    out = tmp_path / "ray"
    process = _ray_run(config, out, cluster, tmp_path / "cache")
    _wait_for_records(out, process, patience, count=2)
    process.kill()
    process.communicate(timeout=patience)
    kept = len(read_records(out))
    assert 2 <= kept < 12
    again = _ray_run(config, out, cluster, tmp_path / "cache")
    stdout, stderr = again.communicate(timeout=patience)
    assert again.returncode == 0, stderr[-3000:]
    assert f"({kept} were already done)" in stdout
    assert _without_timings(out) == _without_timings(local_run)


def test_erag_on_ray_labels_like_the_local_executor(cluster, config, tmp_path, patience) -> None:
    def erag(out: Path, *extra: str) -> dict:
        process = _eor(
            "erag",
            "--config",
            str(config),
            "--data",
            str(QUESTIONS),
            "--member",
            "BM25",
            "--out",
            str(out),
            "--k",
            "3",
            "--limit",
            "4",
            "--cost-questions",
            "0",
            "--no-cache",
            *extra,
            env_cache=tmp_path / "cache",
        )
        stdout, stderr = process.communicate(timeout=patience)
        assert process.returncode == 0, stderr[-3000:]
        return json.loads((out / "erag.json").read_text())

    local = erag(tmp_path / "local")
    on_ray = erag(tmp_path / "ray", "--executor", "ray", "--ray-address", cluster)
    assert on_ray["questions"] == local["questions"]  # every document's answer and label, the e2e answers
    assert on_ray["mean"] == local["mean"] and on_ray["correlation"] == local["correlation"]


def test_executor_options_are_checked() -> None:
    from eor.core.errors import ConfigError
    from eor.pipeline.executor import build_executor

    for bad in ({"kind": "slurm"}, {"kind": "ray", "workers": 0}, {"kind": "local", "address": "x:1"}):
        with pytest.raises(ConfigError):
            build_executor(**bad)


def test_utility_on_ray_scores_like_the_local_executor(cluster, config, tmp_path, patience) -> None:
    def utility(out: Path, *extra: str) -> dict:
        args = ["utility", "--config", str(config), "--data", str(QUESTIONS), "--member", "BM25", "--out", str(out)]
        args += ["--limit", "3", "--ks", "1,2", "--similarity", "f1", "--no-cache", *extra]
        process = _eor(*args, env_cache=tmp_path / "cache")
        _, stderr = process.communicate(timeout=patience)
        assert process.returncode == 0, stderr[-3000:]
        return json.loads((out / "utility.json").read_text())

    local = utility(tmp_path / "local")
    on_ray = utility(tmp_path / "ray", "--executor", "ray", "--ray-address", cluster)
    assert on_ray["questions"] == local["questions"] and on_ray["mean"] == local["mean"]


def test_the_workers_share_the_generation_cache(cluster, config, local_run, tmp_path, patience) -> None:
    """With the cache on, the Ray workers write into the one cache file of this machine: a local run after
    them reads every prompt back and generates none."""
    cache = tmp_path / "cache"
    process = _ray_run(config, tmp_path / "ray", cluster, cache, cached=True)
    _, stderr = process.communicate(timeout=patience)
    assert process.returncode == 0, stderr[-3000:]
    args = ["run", "--config", str(config), "--data", str(QUESTIONS), "--out", str(tmp_path / "local"), "--limit", "12"]
    local = _eor(*args, env_cache=cache)
    stdout, stderr = local.communicate(timeout=patience)
    assert local.returncode == 0, stderr[-3000:]
    assert "36 prompts read back, 0 generated" in stdout
    assert _without_timings(tmp_path / "local") == _without_timings(local_run)


def test_the_local_executor_does_not_import_ray() -> None:
    modules = "eor.cli, eor.commands.runner, eor.commands.erag_command"
    code = f"import sys, {modules}; assert 'ray' not in sys.modules, 'ray imported'"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
