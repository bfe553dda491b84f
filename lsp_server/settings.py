"""The server's settings, as editors send them.

They arrive as ``initializationOptions`` and in
``workspace/didChangeConfiguration`` (``{"settings": {"cpc": {...}}}`` from
VS Code, or the bare object), with camelCase keys:

    >>> settings, problems = Settings().updated({"cpc": {"mode": "heal", "maxTokens": 0}})
    >>> settings.mode, settings.max_tokens, problems
    ('heal', 48, ['maxTokens must be an integer of at least 1 (got 0)'])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from cpc.session import (
    DEFAULT_CONTEXT_SIZE, MODES, REMOTE_APIS, EngineSettings, FusionWeights, Options, RemoteOptions, WorkspaceLimits,
    address_problem, is_remote,
)

_LIMITS = WorkspaceLimits()
GENERATION_BUDGET_MS = 2000.0
"""An editor's suggestion stops growing after this long, however slow the machine."""
_REMOTE = RemoteOptions()

_KEYS = {
    "model": "model",
    "gpuLayers": "gpu_layers",
    "threads": "threads",
    "contextSize": "context_size",
    "remoteVocab": "remote_vocab",
    "remoteTopK": "remote_top_k",
    "remoteTimeoutMs": "remote_timeout_ms",
    "remoteApi": "remote_api",
    "remoteCaFile": "remote_ca_file",
    "mode": "mode",
    "multiline": "multiline",
    "maxTokens": "max_tokens",
    "items": "items",
    "debounceMs": "debounce_ms",
    "promptBudgetMs": "prompt_budget_ms",
    "wordBudgetMs": "word_budget_ms",
    "warmCache": "warm_cache",
    "logDocuments": "log_documents",
    "fusion": "fusion",
    "fusionWeight": "fusion_weight",
    "workspaceIndexing": "workspace_indexing",
    "workspaceMaxBytes": "workspace_max_bytes",
    "workspaceMaxFileBytes": "workspace_max_file_bytes",
    "workspaceMaxFiles": "workspace_max_files",
}
_MINIMUM = {
    "gpu_layers": -1, "threads": 0, "context_size": 512, "max_tokens": 1, "items": 1, "debounce_ms": 0, "prompt_budget_ms": 0,
    "word_budget_ms": 0, "remote_top_k": 1, "remote_timeout_ms": 1,
    "workspace_max_bytes": 0, "workspace_max_file_bytes": 0, "workspace_max_files": 0,
}
_SWITCHES = ("multiline", "log_documents", "fusion", "workspace_indexing", "warm_cache")
_NUMBERS = ("fusion_weight",)


@dataclass(frozen=True)
class Settings:
    model: str = "default"
    """``default``, ``smollm2``, a path to a GGUF file, or a model server's address (``http://HOST:PORT``), or
    the addresses of several replicas of one model, separated by spaces or commas (`cpc.replicas`)."""
    gpu_layers: int = 0
    """Layers offloaded to the GPU (-1: all) when llama-cpp-python was built with CUDA or Metal."""
    threads: int = 0
    """CPU threads for the model; 0 uses every core this process may run on, or one fewer while another
    process holds one (`cpc.threads`)."""
    context_size: int = DEFAULT_CONTEXT_SIZE
    """Tokens of context per sequence in the model's KV cache (memory grows with it)."""
    remote_vocab: str = _REMOTE.vocab
    """With a server as ``model``: a local GGUF of the served model, for its vocabulary and tokenizer."""
    remote_top_k: int = _REMOTE.top_k
    """With a server: next tokens asked per state (more is exact over more of the vocabulary, and slower)."""
    remote_timeout_ms: int = int(_REMOTE.timeout_s * 1000)
    """With a server: how long one request may take before the server counts as unavailable."""
    remote_api: str = _REMOTE.api
    """With a server: ``llama-server`` (its ``/completion``), ``openai`` (``/v1/completions``: vLLM,
    SGLang), or ``auto`` (llama-server when it answers ``/props``)."""
    remote_ca_file: str = ""
    """With an ``https://`` server: a PEM file of the certificate authority that signed its certificate (a
    company's own CA), trusted besides the system's; empty: the system's alone. The server's key is not a
    setting: it comes from the environment (`cpc.remote.API_KEY_ENV`)."""
    mode: str = "cpc"
    multiline: bool = False
    max_tokens: int = 48
    items: int = 1
    """Suggestions per request."""
    debounce_ms: int = 30
    """How long a request waits for a newer keystroke before it starts the model."""
    prompt_budget_ms: int = 200
    """Reading the prompt takes about this long at most, at the reading speed timed at load: a window the
    KV cache lacks that takes longer (far into a long file, after a jump) is cut to the text just before
    the cursor, and the whole window's answer follows. A short file is read whole
    (`cpc.window.SHORT_WINDOW`). 0: always the whole window."""
    word_budget_ms: int = 100
    """After this long, a suggestion ends with its first word instead of the end of the line (0: off):
    mid-word, the word comes quickly on a slow machine."""
    warm_cache: bool = True
    """While the model is idle, read the prompt window at the last edit (and the whole window after
    an answer from a cut one) into the KV cache, for the next request; after an answer that ends its
    line, prepare the next line's suggestion (`lsp_server.requests.Foresight`)."""
    log_documents: bool = False
    """Debugging: let the logs show whole protocol messages, document text included."""
    fusion: bool = True
    """Workspace fusion (`cpc.fusion`): the open documents and workspace files score every token choice."""
    fusion_weight: float = 1.0
    """Scales both λ of `cpc.fusion.FusionWeights` (0: fusion changes nothing)."""
    workspace_indexing: bool = True
    """Read the text files of the client's workspace folders for fusion (in the background, git's ignores respected)."""
    workspace_max_bytes: int = _LIMITS.max_total_bytes
    workspace_max_file_bytes: int = _LIMITS.max_file_bytes
    workspace_max_files: int = _LIMITS.max_files

    def updated(self, raw: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
        """These settings with the client's values applied, and a message per value refused."""
        if not isinstance(raw, Mapping):
            return self, []
        if isinstance(raw.get("cpc"), Mapping):
            raw = raw["cpc"]
        changes: dict[str, Any] = {}
        problems = []
        for key, value in raw.items():
            name = _KEYS.get(key, key if key in _KEYS.values() else None)
            if name is None:
                continue
            problem = _check(name, key, value)
            if problem:
                problems.append(problem)
            else:
                changes[name] = float(value) if name in _NUMBERS else value
        return replace(self, **changes), problems

    @property
    def engine(self) -> EngineSettings:
        remote = RemoteOptions(
            vocab=self.remote_vocab, top_k=self.remote_top_k, timeout_s=self.remote_timeout_ms / 1000,
            api=self.remote_api, ca_file=self.remote_ca_file or None,
        )
        return EngineSettings(self.model, self.gpu_layers, self.threads, self.context_size, remote)

    @property
    def options(self) -> Options:
        return Options(
            mode=self.mode, n=self.items, max_tokens=self.max_tokens, multiline=self.multiline,
            prompt_budget_ms=self.prompt_budget_ms or None, word_budget_ms=self.word_budget_ms or None,
            time_budget_ms=GENERATION_BUDGET_MS,
        )

    @property
    def fusion_weights(self) -> FusionWeights | None:
        """The λ of each fusion model, or None when fusion is off (or weighs nothing)."""
        if not self.fusion or self.fusion_weight == 0:
            return None
        tuned = FusionWeights()
        return FusionWeights(ngram=tuned.ngram * self.fusion_weight, identifiers=tuned.identifiers * self.fusion_weight)

    @property
    def workspace_limits(self) -> WorkspaceLimits | None:
        """What one walk of the workspace folders may read, or None when no folder is to be read."""
        if not (self.fusion and self.workspace_indexing):
            return None
        return WorkspaceLimits(
            max_file_bytes=self.workspace_max_file_bytes,
            max_total_bytes=self.workspace_max_bytes,
            max_files=self.workspace_max_files,
        )

    def as_client_json(self) -> dict[str, Any]:
        names = {name: key for key, name in _KEYS.items()}
        return {names[field.name]: getattr(self, field.name) for field in fields(self)}


def _check(name: str, key: str, value: Any) -> str | None:
    if name == "model" and is_remote(value):
        problem = address_problem(value)
        return None if problem is None else f"{key}: {problem}"
    if name in ("model", "remote_vocab"):
        return None if isinstance(value, str) and value.strip() else f"{key} must be a model name or a file path"
    if name == "mode":
        return None if value in MODES else f"{key} must be one of {', '.join(MODES)} (got {value!r})"
    if name == "remote_ca_file":
        return None if isinstance(value, str) else f"{key} must be a file path, or empty (got {value!r})"
    if name == "remote_api":
        return None if value in REMOTE_APIS else f"{key} must be one of {', '.join(REMOTE_APIS)} (got {value!r})"
    if name in _SWITCHES:
        return None if isinstance(value, bool) else f"{key} must be true or false (got {value!r})"
    if name in _NUMBERS:
        number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
        return None if number and value >= 0 else f"{key} must be a number of at least 0 (got {value!r})"
    minimum = _MINIMUM[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        return f"{key} must be an integer of at least {minimum} (got {value!r})"
    return None
