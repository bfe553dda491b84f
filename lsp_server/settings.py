"""The server's settings, as editors send them.

They arrive as ``initializationOptions`` and in
``workspace/didChangeConfiguration`` (``{"settings": {"cpc": {...}}}`` from
VS Code, or the bare object), with camelCase keys:

    >>> settings, problems = Settings().updated({"cpc": {"mode": "heal", "maxTokens": 0}})
    >>> settings.mode, settings.max_tokens, problems
    ('heal', 48, ['maxTokens must be an integer of at least 1 (got 0)'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from cpc.generate import MODES, Options
from cpc.lm import DEFAULT_CONTEXT_SIZE
from cpc.session import EngineSettings

_KEYS = {
    "model": "model",
    "gpuLayers": "gpu_layers",
    "threads": "threads",
    "contextSize": "context_size",
    "mode": "mode",
    "multiline": "multiline",
    "maxTokens": "max_tokens",
    "items": "items",
    "debounceMs": "debounce_ms",
    "logDocuments": "log_documents",
}
_MINIMUM = {"gpu_layers": -1, "threads": 0, "context_size": 512, "max_tokens": 1, "items": 1, "debounce_ms": 0}
_SWITCHES = ("multiline", "log_documents")


@dataclass(frozen=True)
class Settings:
    model: str = "default"
    """``default``, ``smollm2``, or a path to a GGUF file."""
    gpu_layers: int = 0
    """Layers offloaded to the GPU (-1: all) when llama-cpp-python was built with CUDA or Metal."""
    threads: int = 0
    """CPU threads for the model; 0 uses every core this process may run on."""
    context_size: int = DEFAULT_CONTEXT_SIZE
    """Tokens of context per sequence in the model's KV cache (memory grows with it)."""
    mode: str = "cpc"
    multiline: bool = False
    max_tokens: int = 48
    items: int = 1
    """Suggestions per request."""
    debounce_ms: int = 30
    """How long a request waits for a newer keystroke before it starts the model."""
    log_documents: bool = False
    """Debugging: let the logs show whole protocol messages, document text included."""

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
                changes[name] = value
        return replace(self, **changes), problems

    @property
    def engine(self) -> EngineSettings:
        return EngineSettings(self.model, self.gpu_layers, self.threads, self.context_size)

    @property
    def options(self) -> Options:
        return Options(mode=self.mode, n=self.items, max_tokens=self.max_tokens, multiline=self.multiline)

    def as_client_json(self) -> dict[str, Any]:
        names = {name: key for key, name in _KEYS.items()}
        return {names[field.name]: getattr(self, field.name) for field in fields(self)}


def _check(name: str, key: str, value: Any) -> str | None:
    if name == "model":
        return None if isinstance(value, str) and value.strip() else f"{key} must be a model name or a file path"
    if name == "mode":
        return None if value in MODES else f"{key} must be one of {', '.join(MODES)} (got {value!r})"
    if name in _SWITCHES:
        return None if isinstance(value, bool) else f"{key} must be true or false (got {value!r})"
    minimum = _MINIMUM[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        return f"{key} must be an integer of at least {minimum} (got {value!r})"
    return None
