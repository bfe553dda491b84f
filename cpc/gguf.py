"""A GGUF model opened through llama.cpp's low-level API (llama-cpp-python).

This module owns the llama.cpp handles and their lifetime: loading (the
vocabulary alone, or with weights), rendering tokens to bytes, tokenizing.
The batched, stateful evaluation of the model lives in `cpc.llama`.

    >>> model = GGUFModel.open("smollm2", vocab_only=True)
    >>> model.tokenize(b"def main():")
    [1604, 1085, 3734]
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import llama_cpp
import numpy as np

from cpc.model_files import ModelError, Progress, resolve_model
from cpc.resident import release_mapped_pages

log = logging.getLogger(__name__)

_NOT_TEXT = (
    llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
    | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    | llama_cpp.LLAMA_TOKEN_ATTR_UNUSED
)
_GGML_LOG_LEVEL_INFO = 2
_GGML_LOG_LEVEL_ERROR = 4
_KV_BYTES_PER_VALUE = 2  # llama.cpp's default KV cache type is f16
_seen = threading.local()
_STOPPED = re.compile(rb"(failed with error 1|compute status: 1|failed to decode, ret = 2)\s*$")
"""What llama.cpp logs as errors for a decode that `cpc.llama.LlamaLM.stop_now` broke into
(GGML_STATUS_ABORTED is 1, llama_decode's aborted is 2): no failure."""


@cache
def _init_backend() -> None:
    """Initialise llama.cpp once and route its chatter to Python logging."""
    llama_cpp.llama_backend_init()
    llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
    atexit.register(_log_to_stderr_at_exit)


def _log_to_stderr_at_exit() -> None:
    """Give llama.cpp its own C logger back: it must not call into a Python that is shutting down."""
    llama_cpp.llama_log_set(ctypes.cast(None, llama_cpp.llama_log_callback), ctypes.c_void_p(0))


@llama_cpp.llama_log_callback
def _LOG_CALLBACK(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    error = level == _GGML_LOG_LEVEL_ERROR and not _STOPPED.search(text)
    heard = getattr(_seen, "lines", None)
    if not error and heard is None:
        return
    line = text.decode("utf-8", "replace").rstrip()
    if error:
        log.error(line)
    if heard is not None and (error or level == _GGML_LOG_LEVEL_INFO):
        heard.append((level, line))


@contextmanager
def llama_log() -> Iterator[list[tuple[int, str]]]:
    """The error and info lines llama.cpp logs on this thread while the block runs, as (level, line).

    llama.cpp answers a failed load with a null handle; the reason (a
    truncated file, a failed allocation) is only in its log, and so is
    where a loaded model's layers went (`Placement.from_log`).
    """
    _init_backend()
    lines: list[tuple[int, str]] = []
    _seen.lines = lines
    try:
        yield lines
    finally:
        _seen.lines = None


def llama_reason(lines: list[tuple[int, str]]) -> str:
    """The most telling of llama.cpp's error lines, without the C function names.

    A failed load ends with generic lines ("failed to load model"); the
    first line that says more (a short read, a tensor past the end of the
    file, a failed allocation) is the reason.
    """
    reasons = [line.split(": ", 1)[-1] for level, line in lines if level == _GGML_LOG_LEVEL_ERROR]
    reasons = [reason.removeprefix("error loading model: ") for reason in reasons]
    specific = [reason for reason in reasons if "failed to load model" not in reason]
    return (specific or reasons or ["no reason given"])[0]


_USING_DEVICE = re.compile(r"using device (\S+) \(([^)]*)\)")
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


@dataclass(frozen=True)
class Placement:
    """Where a loaded model runs: llama.cpp's backend and device, and how many layers it offloaded there.

    >>> Placement.from_log(["llama_model_load_from_file_impl: using device CUDA0 (NVIDIA H100 80GB HBM3) (0000:01:00.0)"
    ...                     " - 80562 MiB free", "load_tensors: offloaded 19/19 layers to GPU"], True, 19).describe()
    'CUDA0 (NVIDIA H100 80GB HBM3), 19 of 19 layers offloaded'
    >>> Placement.from_log([], False, 19).describe()
    'CPU (this llama-cpp-python was built without GPU support)'
    """

    backend: str
    """``CPU``, or the GPU backend the layers went to (``CUDA``, ``Metal``, ``Vulkan``...)."""
    device: str
    """The device llama.cpp named (``CUDA0 (NVIDIA H100 80GB HBM3)``), or ``CPU``."""
    offloaded: int
    layers: int
    """Layers that can be offloaded: the repeating layers and the output layer."""
    gpu_build: bool

    @classmethod
    def from_log(cls, lines: list[str], gpu_build: bool, layers: int) -> Placement:
        """Read from the info lines llama.cpp logs while it loads a model."""
        devices = [match for line in lines if (match := _USING_DEVICE.search(line))]
        counts = [match for line in lines if (match := _OFFLOADED.search(line))]
        offloaded, layers = (int(counts[-1][1]), int(counts[-1][2])) if counts else (0, layers)
        if not devices or not offloaded:
            return cls("CPU", "CPU", 0, layers, gpu_build)
        name, description = devices[0][1], devices[0][2]
        return cls(name.rstrip("0123456789") or name, f"{name} ({description})", offloaded, layers, gpu_build)

    def describe(self) -> str:
        """One line for the log and the status: the device, and the layers on it."""
        if self.offloaded:
            return f"{self.device}, {self.offloaded} of {self.layers} layers offloaded"
        why = "gpuLayers is 0" if self.gpu_build else "this llama-cpp-python was built without GPU support"
        return f"CPU ({why})"

    def as_json(self) -> dict[str, object]:
        return {"backend": self.backend, "device": self.device, "offloadedLayers": self.offloaded,
                "layers": self.layers, "gpuBuild": self.gpu_build, "text": self.describe()}


@cache
def cpu_has_amx() -> bool:
    """Whether the CPU reports Intel AMX (Linux's /proc/cpuinfo flags)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            return any(line.startswith("flags") and " amx_" in line for line in cpuinfo)
    except OSError:
        return False


class GGUFModel:
    """A loaded GGUF model: its vocabulary handle and (unless vocab-only) weights."""

    def __init__(self, path: Path, handle: llama_cpp.llama_model_p, gpu_layers: int = 0):
        self.path = path
        self.handle = handle
        self.gpu_layers = gpu_layers
        self.vocab_handle = llama_cpp.llama_model_get_vocab(handle)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab_handle)
        self._buffers = threading.local()
        """Each thread's token buffer for `tokenize`: threads tokenize at once (a request, the corpus's
        reading, a model server's first check), and one shared buffer mixed their tokens."""
        self.placement: Placement | None = None
        """Where the weights run (None for a vocabulary-only model)."""

    @classmethod
    def open(
        cls,
        model: str | os.PathLike | None = None,
        *,
        vocab_only: bool = False,
        gpu_layers: int = 0,
        progress: Progress | None = None,
    ) -> GGUFModel:
        """Load a model by name (``default``, ``smollm2``) or path.

        Raises `ModelError` naming the path when the file is missing or
        llama.cpp cannot load it.
        """
        path = resolve_model(model, progress)
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = vocab_only
        params.n_gpu_layers = gpu_layers
        # On a CPU with AMX, llama.cpp 0.3.36 puts the weights in AMX buffers,
        # and its AMX matmul crashed the process on the first decode (a VM whose
        # Xeon reports amx_int8 but faults on ldtilecfg). Elsewhere the extra
        # buffer types (repacked weights) stay: they are faster.
        params.use_extra_bufts = not cpu_has_amx()
        with llama_log() as lines:
            handle = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not handle:
            raise ModelError(
                f"llama.cpp could not load {path} ({llama_reason(lines)}): the file is truncated, corrupt "
                "or of an architecture this llama.cpp does not know -- copy it again, "
                "or set `model` (or --model) to another GGUF file"
            )
        model = cls(path, handle, gpu_layers)
        if not vocab_only:  # llama_model_n_layer aborts the process on a vocabulary-only model
            model.placement = Placement.from_log(
                [line for _, line in lines], llama_cpp.llama_supports_gpu_offload(),
                llama_cpp.llama_model_n_layer(handle) + 1,
            )
            release_mapped_pages(path)
        return model

    def __del__(self) -> None:
        handle = getattr(self, "handle", None)
        # At interpreter shutdown the order of finalizers is arbitrary (a
        # context may outlive its model there): the process frees it all.
        if handle and not sys.is_finalizing():
            llama_cpp.llama_model_free(handle)
            self.handle = None

    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token of context takes (every layer, keys and values, f16).

        Read from the GGUF metadata: llama.cpp's ``llama_model_n_head`` aborts
        the process on a vocabulary-only model.
        """
        arch = self.metadata("general.architecture")
        layers = self._metadata_int(f"{arch}.block_count", 0)
        heads = self._metadata_int(f"{arch}.attention.head_count", 1)
        kv_heads = self._metadata_int(f"{arch}.attention.head_count_kv", heads)
        head_size = self._metadata_int(f"{arch}.embedding_length", 0) // max(1, heads)
        key_size = self._metadata_int(f"{arch}.attention.key_length", head_size)
        value_size = self._metadata_int(f"{arch}.attention.value_length", head_size)
        return layers * kv_heads * (key_size + value_size) * _KV_BYTES_PER_VALUE

    def metadata(self, key: str) -> str | None:
        """A GGUF metadata value as text, or None when the file has no such key."""
        buffer = ctypes.create_string_buffer(256)
        length = llama_cpp.llama_model_meta_val_str(self.handle, key.encode(), buffer, len(buffer))
        return buffer.value.decode("utf-8", "replace") if length >= 0 else None

    def _metadata_int(self, key: str, default: int) -> int:
        value = self.metadata(key)
        return int(value) if value and value.isdigit() else default  # per-layer arrays read as the default

    def tokenize(self, data: bytes) -> list[int]:
        """Token ids of ``data`` with the model's own tokenizer (no BOS, no special parsing)."""
        tokens = getattr(self._buffers, "tokens", None)
        if tokens is None or len(data) + 8 > len(tokens):
            tokens = self._buffers.tokens = (llama_cpp.llama_token * max(4096, len(data) + 8))()
        count = llama_cpp.llama_tokenize(self.vocab_handle, data, len(data), tokens, len(tokens), False, False)
        if count < 0:
            raise RuntimeError(f"llama_tokenize needed {-count} tokens, buffer had {len(tokens)}")
        return tokens[:count]

    def splitting_token(self) -> tuple[int, bytes] | None:
        """A token that llama.cpp cuts out of any text before it tokenizes the rest, and its text; None if
        the model has none.

        llama.cpp finds every user-defined token's text in the raw text first (even when special tokens
        are not parsed) and tokenizes the pieces between them apart, so texts joined by such a token
        tokenize as they do alone (`cpc.tokenizer.LlamaTokenizer.encode_many`). Chosen: the longest
        without whitespace and without stripping the whitespace around it (the least likely to touch
        what it joins).

        >>> GGUFModel.open("default", vocab_only=True).splitting_token()
        (255999, b'<start_of_image>')
        >>> GGUFModel.open("smollm2", vocab_only=True).splitting_token() is None
        True
        """
        attributes = self.token_attributes
        refused = (llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
                   | llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP | llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP)
        usable = (attributes & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED != 0) & (attributes & refused == 0)
        named = [(token, llama_cpp.llama_vocab_get_text(self.vocab_handle, token)) for token in np.flatnonzero(usable).tolist()]
        named = [(token, text) for token, text in named if text and not any(chr(byte).isspace() for byte in text)]
        return max(named, key=lambda item: (len(item[1]), -item[0]), default=None)

    @cached_property
    def token_attributes(self) -> np.ndarray:
        """Each token's llama.cpp attributes (``LLAMA_TOKEN_ATTR_*`` flags)."""
        get_attr, vocab = llama_cpp.llama_vocab_get_attr, self.vocab_handle
        return np.fromiter((get_attr(vocab, token) for token in range(self.n_vocab)), dtype=np.int32, count=self.n_vocab)

    def token_pieces(self) -> tuple[list[bytes], np.ndarray]:
        """Every token's exact bytes, and a mask of tokens that never cover text."""
        vocab = self.vocab_handle
        buffer = ctypes.create_string_buffer(256)
        to_piece = llama_cpp.llama_token_to_piece
        pieces: list[bytes] = []
        special = self.token_attributes & _NOT_TEXT != 0
        for token in range(self.n_vocab):
            length = to_piece(vocab, token, buffer, 256, 0, False)
            if length < 0:
                large = ctypes.create_string_buffer(-length)
                length = to_piece(vocab, token, large, -length, 0, False)
                piece = large.raw[:length]
            else:
                piece = buffer.raw[:length]
            pieces.append(piece)
            if not piece:
                special[token] = True
        return pieces, special

    def fim_tokens(self) -> tuple[int, int, int] | None:
        """The fill-in-the-middle tokens (prefix, suffix, middle), or None when the model has none.

        llama.cpp finds them in the GGUF metadata or by their usual names
        (``<fim_prefix>``, ``<|fim_prefix|>``, ...).
        """
        vocab = self.vocab_handle
        tokens = (
            llama_cpp.llama_vocab_fim_pre(vocab),
            llama_cpp.llama_vocab_fim_suf(vocab),
            llama_cpp.llama_vocab_fim_mid(vocab),
        )
        return None if min(tokens) < 0 else tokens

    def document_start(self) -> int:
        """The token a document starts after: BOS, or end-of-text for models that add none.

        GPT-2-style models (SmolLM2) separate training documents with
        ``<|endoftext|>`` rather than starting them with BOS.
        """
        vocab = self.vocab_handle
        if llama_cpp.llama_vocab_get_add_bos(vocab):
            return llama_cpp.llama_vocab_bos(vocab)
        for token in (llama_cpp.llama_vocab_eot(vocab), llama_cpp.llama_vocab_eos(vocab)):
            if token >= 0:
                return token
        return llama_cpp.llama_vocab_bos(vocab)

    def end_of_generation_ids(self, special: np.ndarray) -> list[int]:
        """Tokens that end generation (EOS, EOT, ...); they are among the ``special`` ones."""
        is_eog = llama_cpp.llama_vocab_is_eog
        return [t for t in np.flatnonzero(special).tolist() if is_eog(self.vocab_handle, t)]
