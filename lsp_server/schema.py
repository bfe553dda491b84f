"""The settings schema: every setting's key, type, default, range, meaning and what it reloads, written once.

`lsp_server.settings` parses and checks the editors' settings with it, and
``tools/settings_schema.py --write`` generates from it the editors' copies
(VS Code's ``package.json`` and ``src/schema.ts``, Neovim's
``lua/cpc/settings.lua``) and the settings tables of the docs;
``tests/codebase/test_settings_schema.py`` fails when one of them differs.

    >>> budget = SCHEMA["wordBudgetMs"]
    >>> budget.name, budget.type, budget.default, budget.off
    ('word_budget_ms', 'integer', 100, 0)
    >>> SCHEMA["remoteTopK"].reloads
    'remote'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from cpc.session import DEFAULT_CONTEXT_SIZE, LONG_LINE, MODES, REMOTE_APIS, RemoteOptions, ReadLimits

Type = Literal["string", "integer", "number", "boolean"]
"""The JSON type of a value (VS Code's ``contributes.configuration`` types)."""

Reloads = Literal["any", "local", "remote"]
"""What changing a setting loads again: ``any`` model; a ``local`` one (run in this process) only, never a
model server's connection; a ``remote`` one (the connection to a model server) only, never a local model."""

PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


@dataclass(frozen=True)
class Setting:
    """One setting as the editors send it."""

    key: str
    """camelCase, as in ``settings.json`` (``cpc.<key>``) and Neovim's ``setup()``."""
    type: Type
    default: Any
    description: str
    """Markdown, one line; names another setting as `` `key` ``."""
    minimum: float | None = None
    """The smallest value accepted (integers and numbers)."""
    maximum: float | None = None
    """The largest value accepted (integers and numbers; None: no bound)."""
    enum: tuple[str, ...] | None = None
    """The values accepted, when they are few."""
    enum_descriptions: tuple[str, ...] | None = None
    """One per value of ``enum``, in its order."""
    off: Any = None
    """The one value that turns the setting's feature off (None: it has none); `Settings.unless_off` maps it
    to the engine's None."""
    reloads: Reloads | None = None
    """What a change loads again (None: nothing, it applies to the next request)."""

    @property
    def name(self) -> str:
        """The snake_case field of `lsp_server.settings.Settings`."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.key).lower()


_REMOTE = RemoteOptions()
_LIMITS = ReadLimits()

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "model", "string", "default",
        "The model: `default` (Gemma 3 270M, installed with cpc), `smollm2` (SmolLM2 135M), the path of a GGUF file "
        "(`~` and `${workspaceFolder}` are expanded), or a team's model server `http://HOST:PORT`, or several "
        "replicas of it, their addresses separated by spaces or commas (each document stays on one, a failing one "
        "is skipped; docs/team-server.md).",
        reloads="any",
    ),
    Setting(
        "gpuLayers", "integer", 0,
        "Model layers offloaded to the GPU (llama.cpp `n_gpu_layers`): `0` runs on the CPU only, `-1` offloads "
        "every layer; needs a llama-cpp-python built with GPU support (CUDA, Metal).",
        minimum=-1, reloads="local",
    ),
    Setting(
        "threads", "integer", 0,
        "CPU threads for the model; `0`: every core this process may run on, or fewer while other processes hold "
        "cores (the model's thread waits for a core then).",
        minimum=0, reloads="local",
    ),
    Setting(
        "contextSize", "integer", DEFAULT_CONTEXT_SIZE,
        "Tokens of context per sequence the model is loaded with at most (the llama.cpp KV cache: 3 sequences, 8 "
        "on a GPU; memory grows with it), at least 512. A model in the server's process gets what its prompts read, "
        "at most this: 1280 for the default model, which reads no text after the cursor; refused when the memory "
        "cannot hold that.",
        minimum=512, reloads="any",
    ),
    Setting(
        "remoteVocab", "string", _REMOTE.vocab,
        "With a server as `model`: a local GGUF of the served model (a name or a path), for its vocabulary and "
        "tokenizer only (no weights); checked against the server when it connects.",
        reloads="remote",
    ),
    Setting(
        "remoteTopK", "integer", _REMOTE.top_k,
        "With a server as `model`: next tokens asked per model state; more is exact over more of the vocabulary, "
        "and slower (the rest is bounded, and widened where a typed word needs it).",
        minimum=1, reloads="remote",
    ),
    Setting(
        "remoteTimeoutMs", "integer", int(_REMOTE.timeout_s * 1000),
        "With a server as `model`: how long one request may take before the server counts as unavailable (one "
        "warning; suggestions resume when it answers).",
        minimum=1, reloads="remote",
    ),
    Setting(
        "remoteApi", "string", _REMOTE.api,
        "With a server as `model`: the API it speaks: `llama-server` (llama.cpp's `/completion`), `openai` "
        "(`/v1/completions`, as vLLM and SGLang serve it), or `auto` (llama-server when it answers `/props`, "
        "else `openai`).",
        enum=REMOTE_APIS, reloads="remote",
    ),
    Setting(
        "remoteCaFile", "string", "",
        "With an `https://` server as `model`: a PEM file of the certificate authority that signed its "
        "certificate (a company's own CA), trusted besides the system's; empty: the system's alone. The server's "
        "key is no setting: `CPC_REMOTE_API_KEY` in the editor's environment, or in VS Code the command "
        "**CPC: Set Remote API Key** (docs/team-server.md).",
        off="", reloads="remote",
    ),
    Setting(
        "mode", "string", "cpc",
        "How the suggestion is conditioned on the characters before the cursor: `cpc` (character prefix "
        "conditioning), `heal` (token healing) or `naive` (tokenize and continue).",
        enum=MODES,
        enum_descriptions=(
            "Naive: tokenize the text before the cursor and let the model continue it (the baseline).",
            "Token healing: back up over the last token and constrain the model to tokens that start with the "
            "removed text.",
            "Character prefix conditioning: condition the model on text that starts with exactly the typed "
            "characters, summing over every tokenization that covers them.",
        ),
    ),
    Setting(
        "multiline", "boolean", False,
        "Allow suggestions of several lines (they stop at a dedent); off, a suggestion stops at the end of the "
        "line.",
    ),
    Setting("maxTokens", "integer", 48, "Most tokens the model generates for one suggestion.", minimum=1),
    Setting(
        "items", "integer", 1,
        "Suggestions per request (cycle through them), at most 5: each one more delays the first (on 2 cores, p50 "
        "124 ms for 1, 236 ms for 3, 358 ms for 5). Asking for the next suggestion (VS Code: Alt+], Neovim: M-n) brings "
        "up to 3 (or this many, if more), the one shown first.",
        minimum=1, maximum=5,
    ),
    Setting(
        "debounceMs", "integer", 30,
        "When keys come faster than this (a paste, auto-closed brackets, fast typing), how long the server "
        "waits for a newer one before it starts the model (a newer request in that time replaces the older one); "
        "a key after a pause starts the model at once. `0`: no wait.",
        minimum=0, off=0,
    ),
    Setting(
        "promptBudgetMs", "integer", 200,
        "Reading the prompt takes about this long at most, at the reading speed timed at load: far into a long "
        "file the model has not read yet, a suggestion comes from the text just before the cursor, and the whole "
        "window's suggestion replaces it; a file read within the budget is read whole. `0`: off, always the whole window.",
        minimum=0, off=0,
    ),
    Setting(
        "wordBudgetMs", "integer", 100,
        "Past this, the first word of a suggestion is shown at once (the word being typed comes quickly on a "
        "slow machine) and the rest of the line follows: the ghost text grows with no key pressed. `0`: off, "
        "wait for the whole suggestion.",
        minimum=0, off=0,
    ),
    Setting(
        "warmCache", "boolean", True,
        "While the model is idle, read the text at your last edit, or where you put the cursor, into its cache, "
        "so the next suggestion comes sooner, and prepare the next line's suggestion after one that ends its line.",
        off=False,
    ),
    Setting(
        "logDocuments", "boolean", False,
        "Debugging: let the server's log show whole LSP messages, document text included (off by default, so "
        "the log never holds your code).",
    ),
    Setting(
        "fusion", "boolean", True,
        "Workspace fusion: the open documents and the workspace folders' files score every token the model "
        "chooses, so suggestions use the project's own names; off, suggestions are exactly those without a "
        "workspace.",
        off=False,
    ),
    Setting(
        "fusionWeight", "number", 1.0,
        "Scales the weight of both fusion models (`1`: the tuned weights; `0`: off, fusion changes nothing).",
        minimum=0, off=0,
    ),
    Setting(
        "workspaceIndexing", "boolean", True,
        "Read the text files of the workspace folders for fusion, in the background (with `fusion` on): files "
        "git ignores, installed packages (`node_modules`, Python virtual environments) and caches, binaries and "
        "files over `workspaceMaxFileBytes` are skipped, no link is followed, nothing is run; a file closed in the "
        "editor, or changed on disk, is read again.",
        off=False,
    ),
    Setting(
        "workspaceMaxBytes", "integer", _LIMITS.max_total_bytes,
        "The reading of the workspace stops before more bytes than this.", minimum=0,
    ),
    Setting(
        "workspaceMaxFileBytes", "integer", _LIMITS.max_file_bytes,
        "Larger workspace files (generated code, data, minified bundles) are not read, and a larger open "
        f"document is not counted for fusion; in any file, a line of more than {LONG_LINE:,} characters (a "
        "bundle's, a data line's) is not counted.",
        minimum=0,
    ),
    Setting(
        "workspaceMaxFiles", "integer", _LIMITS.max_files,
        "The reading of the workspace stops after this many files.", minimum=0,
    ),
)

SCHEMA: dict[str, Setting] = {setting.key: setting for setting in SETTINGS}
"""The settings by key."""
