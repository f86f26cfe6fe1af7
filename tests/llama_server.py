"""llama-cpp-python's OpenAI-compatible server on 127.0.0.1, started for a test (a real server, no mock)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import requests

from eor.core.models import resolve_model


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` serving a packaged model as `alias`; `base` is its /v1 URL."""

    def __init__(self, model: str = "smollm2-135m", alias: str = "smollm2", threads: int | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(resolve_model(model))]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048", "--model_alias", alias]
        if threads:
            command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_ready(self, seconds: float = 60) -> LlamaServer:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}")
            try:
                if requests.get(f"{self.base}/models", timeout=1).ok:
                    return self
            except requests.ConnectionError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not start within {seconds:.0f} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
