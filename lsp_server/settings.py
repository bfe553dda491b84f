"""The server's settings, as editors send them, parsed and checked by the schema (`lsp_server.schema`).

They arrive as ``initializationOptions`` and in
``workspace/didChangeConfiguration`` (``{"settings": {"cpc": {...}}}`` from
VS Code, or the bare object), with camelCase keys; a key left out keeps its
value (the schema's default at first):

    >>> settings, problems = Settings().updated({"cpc": {"mode": "heal", "maxTokens": 0}})
    >>> settings.mode, settings.max_tokens, problems
    ('heal', 48, ['maxTokens must be an integer of at least 1 (got 0)'])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field, make_dataclass, replace
from typing import Any

from cpc.session import (
    EngineSettings, FusionWeights, Options, ReadLimits, RemoteOptions, address_problem, is_remote,
)
from lsp_server.schema import PYTHON_TYPES, SCHEMA, SETTINGS, Setting

GENERATION_BUDGET_MS = 2000.0
"""An editor's suggestion stops growing after this long, however slow the machine."""

_BY_NAME = {**{setting.name: setting for setting in SETTINGS}, **SCHEMA}
"""Each setting by its camelCase key and by its snake_case field name (both are accepted)."""


class _Readings:
    """What the server reads from its settings; `Settings` adds one field per setting of the schema."""

    def updated(self, raw: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
        """These settings with the client's values applied, and a message per value refused."""
        if not isinstance(raw, Mapping):
            return self, []
        if isinstance(raw.get("cpc"), Mapping):
            raw = raw["cpc"]
        changes: dict[str, Any] = {}
        problems = []
        for key, value in raw.items():
            setting = _BY_NAME.get(key)
            if setting is None:
                continue
            problem = _problem(setting, key, value)
            if problem:
                problems.append(problem)
            else:
                changes[setting.name] = PYTHON_TYPES[setting.type](value)  # a JSON 1 for a number: 1.0
        return replace(self, **changes), problems

    def unless_off(self, key: str) -> Any:
        """Setting ``key``'s value, or None, the engine's spelling of off, when it is the schema's off (`Setting.off`).

        >>> Settings(word_budget_ms=0).unless_off("wordBudgetMs"), Settings().unless_off("wordBudgetMs")
        (None, 100)
        """
        setting = SCHEMA[key]
        value = getattr(self, setting.name)
        return None if setting.off is not None and value == setting.off else value

    @property
    def engine(self) -> EngineSettings:
        remote = RemoteOptions(
            vocab=self.remote_vocab, top_k=self.remote_top_k, timeout_s=self.remote_timeout_ms / 1000,
            api=self.remote_api, ca_file=self.unless_off("remoteCaFile"),
        )
        return EngineSettings(self.model, self.gpu_layers, self.threads, self.context_size, remote)

    @property
    def options(self) -> Options:
        return Options(
            mode=self.mode, n=self.items, max_tokens=self.max_tokens, multiline=self.multiline,
            prompt_budget_ms=self.unless_off("promptBudgetMs"), word_budget_ms=self.unless_off("wordBudgetMs"),
            time_budget_ms=GENERATION_BUDGET_MS,
        )

    @property
    def fusion_weights(self) -> FusionWeights | None:
        """The λ of each fusion model, or None when fusion is off (or weighs nothing)."""
        if not self.fusion or self.unless_off("fusionWeight") is None:
            return None
        tuned = FusionWeights()
        return FusionWeights(ngram=tuned.ngram * self.fusion_weight, identifiers=tuned.identifiers * self.fusion_weight)

    @property
    def read_limits(self) -> ReadLimits | None:
        """What one walk of the workspace folders may read, or None when no folder is to be read."""
        if not (self.fusion and self.workspace_indexing):
            return None
        return ReadLimits(
            max_file_bytes=self.workspace_max_file_bytes,
            max_total_bytes=self.workspace_max_bytes,
            max_files=self.workspace_max_files,
        )

    def as_client_json(self) -> dict[str, Any]:
        """Every setting by its camelCase key, as a client would send it."""
        return {setting.key: getattr(self, setting.name) for setting in SETTINGS}


Settings = make_dataclass(
    "Settings", [(setting.name, PYTHON_TYPES[setting.type], field(default=setting.default)) for setting in SETTINGS],
    bases=(_Readings,), frozen=True,
    namespace={"__module__": __name__, "__doc__": (
        "The server's settings: one field per setting of `lsp_server.schema.SETTINGS`, named in snake_case "
        "(``maxTokens``: ``max_tokens``), with its default."
    )},
)


def _problem(setting: Setting, key: str, value: Any) -> str | None:
    """Why ``value`` is refused for ``setting`` (sent as ``key``), or None when it is accepted."""
    if setting.key == "model" and is_remote(value):
        problem = address_problem(value)
        return None if problem is None else f"{key}: {problem}"
    if setting.enum is not None:
        return None if value in setting.enum else f"{key} must be one of {', '.join(setting.enum)} (got {value!r})"
    if setting.type == "string" and setting.off == "":
        return None if isinstance(value, str) else f"{key} must be a file path, or empty (got {value!r})"
    if setting.type == "string":
        return None if isinstance(value, str) and value.strip() else f"{key} must be a model name or a file path"
    if setting.type == "boolean":
        return None if isinstance(value, bool) else f"{key} must be true or false (got {value!r})"
    if setting.type == "number":
        number = _finite(value)
    else:
        number = value if isinstance(value, int) and not isinstance(value, bool) else None
    maximum = math.inf if setting.maximum is None else setting.maximum
    if number is None or not setting.minimum <= number <= maximum:
        kind = "a number" if setting.type == "number" else "an integer"
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return f"{key} must be {kind} {_range(setting)} (got {shown})"
    return None


def _finite(value: Any) -> float | None:
    """A JSON number as a finite float; None for anything else (a boolean, a string, NaN, an infinity, an integer
    too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _range(setting: Setting) -> str:
    """The values a numeric setting accepts, in words: ``of at least 1``, ``from 1 to 5``."""
    if setting.maximum is None:
        return f"of at least {setting.minimum:g}"
    return f"from {setting.minimum:g} to {setting.maximum:g}"
