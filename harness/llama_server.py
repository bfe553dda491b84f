"""A real llama-server for the tests and benchmarks: the binary `make llama-server` builds into .venv/bin.

It listens on 127.0.0.1 on a free port, serves a local GGUF (the default
model unless told), and can be paused (SIGSTOP: a server that answers
nothing, to test timeouts), resumed, killed and started again on the same
port. A missing binary is an error, never a skip: the remote backend is
tested against the real server or not at all.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cpc.gguf import cpu_has_amx
from cpc.model_files import resolve_model
from harness.threads import MODEL_THREADS

BINARY = Path(sys.executable).with_name("llama-server")
STOP_GRACE_S = 1.0
"""How long a stopping llama-server may take before the second SIGTERM that makes it exit at once."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """One llama-server process, started and stopped by the caller (or as a context manager)."""

    def __init__(
        self,
        model: str = "default",
        *,
        port: int | None = None,
        parallel: int = 1,
        slot_context: int = 2048,
        threads: int | None = None,
        kv_unified: bool = False,
        extra: tuple[str, ...] = (),
        log_path: Path | None = None,
        api_key: str | None = None,
    ) -> None:
        """``slot_context`` tokens per slot (``-c`` is that times ``parallel``); ``kv_unified``: one KV cache
        for all slots (their tokens batch together) instead of one per slot; ``extra`` more flags;
        ``api_key``: the key every request but ``/health`` must carry (``--api-key``)."""
        if not BINARY.exists():
            raise FileNotFoundError(f"{BINARY} is missing: run `make llama-server` (it builds llama.cpp's server)")
        self.model = resolve_model(model)
        self.port = port or free_port()
        self.parallel = parallel
        self.slot_context = slot_context
        self.threads = threads or MODEL_THREADS
        self.kv_unified = kv_unified
        self.extra = extra
        self.log_path = log_path
        self.api_key = api_key
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [
            str(BINARY), "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
            "-c", str(self.slot_context * self.parallel), "--parallel", str(self.parallel),
            "--kv-unified" if self.kv_unified else "--no-kv-unified",
            # Gemma 3's sliding-window layers keep every position, so any cached prefix is reusable
            "--swa-full", "-t", str(self.threads), "--no-webui",
            # as in-process (cpc.gguf): AMX weight buffers crashed llama.cpp on this machine's VM
            *(["--no-repack"] if cpu_has_amx() else []), *(["--api-key", self.api_key] if self.api_key else []),
            *self.extra,
        ]

    def start(self, timeout: float = 120) -> LlamaServer:
        """Start the process and wait until ``/health`` answers (the model is loaded)."""
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if self.log_path:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.process.returncode}: {' '.join(self.command())}")
            if self.healthy():
                self._warm_up()
                return self
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"llama-server did not become healthy in {timeout:.0f} s")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return response.status == 200 and json.load(response).get("status") == "ok"
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def _warm_up(self) -> None:
        """One tiny completion: the first one allocates the compute graphs, which tests should not time."""
        body = json.dumps({"prompt": "def", "n_predict": 1}).encode()
        headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {self.api_key}"} if self.api_key else {})
        request = urllib.request.Request(f"{self.url}/completion", body, headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()

    def pause(self) -> None:
        """SIGSTOP: connections are accepted by the kernel and nothing answers."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as a crash: in-flight requests see their connection drop."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM, and a second one after `STOP_GRACE_S`, as an administrator stops a replica.

        Once told to stop, llama-server answers none of the requests in flight and waits for them; at a
        second SIGTERM it exits at once, their connections close, and the editors go to another replica.
        """
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
            for grace in (STOP_GRACE_S, 10):
                self.process.terminate()
                try:
                    self.process.wait(timeout=grace)
                    return
                except subprocess.TimeoutExpired:
                    pass
            self.kill()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def all_running(servers: list[LlamaServer]) -> Iterator[list[LlamaServer]]:
    """Several servers (replicas) started in turn, and all stopped at the end, also when one fails to start."""
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()
