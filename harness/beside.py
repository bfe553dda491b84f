"""What else runs on the user's machine while a measurement runs: a build's busy core, a model test's llama.cpp threads.

    >>> with beside("core"):  # one core kept busy by another process
    ...     pass
    >>> LOADS
    ('none', 'core', 'model')

``"model"`` is another llama.cpp process that decodes with every core, as a
model test does beside the editor: its threads spin at llama.cpp's
barriers, and so do the measured model's, each while the other's hold the
cores (`cpc.threads`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOADS = ("none", "core", "model")

_ROOT = Path(__file__).resolve().parent.parent

_SPIN = "import os\nos.sched_setaffinity(0, {cores})\nwhile True: pass"

_MODEL = r"""
import os
os.sched_setaffinity(0, {cores})
from cpc.engine import Engine
engine = Engine.load("default", threads=len({cores}))
tokens = engine.lm.bos + tuple(engine.tokenizer.encode(b"def main():\n    return 0\n" * 20))
print("running", flush=True)
while True:
    for end in range(2, len(tokens)):
        engine.lm.next_logprobs([tokens[:end]])
"""


@contextmanager
def beside(load: str, cores: set[int] | None = None) -> Iterator[None]:
    """Run ``load`` (of `LOADS`) in another process until the block ends; on ``cores`` (by default, every core
    this process may use; ``"core"`` takes the last of them). A model's load starts once its model is loaded."""
    if load not in LOADS:
        raise ValueError(f"unknown load {load!r}: one of {', '.join(LOADS)}")
    if load == "none":
        yield
        return
    cores = cores or os.sched_getaffinity(0)
    script = _MODEL.format(cores=cores) if load == "model" else _SPIN.format(cores={max(cores)})
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=_ROOT)
    try:
        if load == "model" and process.stdout.readline().strip() != "running":
            raise RuntimeError("the model beside the measurement did not start")
        yield
    finally:
        process.kill()
        process.wait()
