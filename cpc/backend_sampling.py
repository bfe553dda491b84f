"""A greedy step's summary computed where the logits are: a llama.cpp backend sampler built from ggml ops.

llama.cpp (as vendored in llama-cpp-python 0.3.36) lets a sampler add ops to
the model's graph (`llama_sampler_i.backend_apply`), once per output row,
so they run on the device that holds the logits. `GreedySummary` gives
each row, as its two "probabilities", the row's maximum and
``log(sum(exp(logits - maximum)))``: the `cpc.lm.Normaliser` of a greedy
step. The host still finds the argmax (a pass with no arithmetic, a
seventh of the normaliser's): llama.cpp 0.3.36 hands back another
output's values for a sampled token id once a call's outputs span
several micro-batches, so no id is taken from the graph. The summary
hands the row on unchanged as its sampled logits, so callers that need
whole rows read them as before (`llama_get_sampled_logits_ith`); a row of
log-probabilities (a fused greedy step's) takes the summary's normaliser
too, so the host skips its exponentials. With every output sampled, llama.cpp
copies no raw logits (`needs_raw_logits`), so nothing is copied twice.

On a CPU the ops share the decode's threads and cost more than numpy's
pass (`benchmarks/probe_backend_sampling.py`), so `cpc.llama.LlamaLM` uses
this only for a model whose layers are on a GPU (docs/gpu.md).

    >>> GGML().argmax is not None
    True
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import llama_cpp

_BLOCK = 1024
"""The exponentials are summed as rows of this many logits, so that the CPU backend's threads share them."""


TENSOR, I64 = ctypes.c_void_p, ctypes.c_int64


class GGML:
    """ggml functions from llama-cpp-python's own libggml-base: those the summary needs, and any
    ``signatures`` more (``{name: (result type, *argument types)}``)."""

    SIGNATURES = {
        "ggml_nelements": (I64, TENSOR),
        "ggml_reshape_1d": (TENSOR, TENSOR, TENSOR, I64),
        "ggml_reshape_2d": (TENSOR, TENSOR, TENSOR, I64, I64),
        "ggml_get_rows": (TENSOR, TENSOR, TENSOR, TENSOR),
        "ggml_sum": (TENSOR, TENSOR, TENSOR),
        "ggml_sub": (TENSOR, TENSOR, TENSOR, TENSOR),
        "ggml_exp": (TENSOR, TENSOR, TENSOR),
        "ggml_log": (TENSOR, TENSOR, TENSOR),
        "ggml_argmax": (TENSOR, TENSOR, TENSOR),
        "ggml_concat": (TENSOR, TENSOR, TENSOR, TENSOR, ctypes.c_int),
    }

    def __init__(self, signatures: dict[str, tuple] | None = None) -> None:
        library = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
        for name, (result, *arguments) in {**self.SIGNATURES, **(signatures or {})}.items():
            function = getattr(library, name)
            function.restype, function.argtypes = result, list(arguments)
            setattr(self, name.removeprefix("ggml_"), function)

    def normaliser(self, context: int, row: int) -> int:
        """Ops for one row of logits: its maximum, then ``log(sum(exp(row - maximum)))`` (two F32)."""
        n = self.nelements(row)
        row = self.reshape_1d(context, row, n)
        argmax = self.argmax(context, self.reshape_2d(context, row, n, 1))
        as_values = self.reshape_2d(context, row, 1, n)  # one value per row: get_rows picks values
        maximum = self.get_rows(context, as_values, argmax)
        width = _BLOCK if n % _BLOCK == 0 else n
        blocks = self.reshape_2d(context, row, width, n // width)
        log_sum = self.log(context, self.sum(context, self.exp(context, self.sub(context, blocks, maximum))))
        return self.concat(context, self.reshape_1d(context, maximum, 1), log_sum, 0)


class GreedySummary:
    """A backend sampler that reports each row's normaliser as its probabilities; the row passes on."""

    def __init__(self, ggml: GGML) -> None:
        self.ggml = ggml
        self.interface = llama_cpp.llama_sampler_i()
        self._callbacks = (  # kept referenced: llama.cpp calls them for the context's life
            llama_cpp.llama_sampler_i_name(lambda sampler: b"cpc-greedy-summary"),
            llama_cpp.llama_sampler_i_apply(lambda sampler, candidates: None),
            llama_cpp.llama_sampler_i_backend_init(lambda sampler, buffer_type, n_outputs: True),
            llama_cpp.llama_sampler_i_backend_apply(self._apply),
        )
        interface = self.interface
        interface.name, interface.apply, interface.backend_init, interface.backend_apply = self._callbacks
        self._chains: list = []

    def _apply(self, sampler, context, graph, data) -> None:
        out = data.contents
        out.probs = self.ggml.normaliser(context, out.logits)

    @classmethod
    def on(cls, ctx, n_seq: int) -> GreedySummary:
        """A summary attached to every sequence of ``ctx``."""
        summary = cls(GGML())
        summary.attach(ctx, n_seq)
        return summary

    def attach(self, ctx, n_seq: int) -> None:
        """Sample every sequence of ``ctx`` with this summary."""
        self._chains = attach(ctx, self.interface, n_seq)

    def detach(self, ctx) -> None:
        """Take the samplers off every sequence and free them."""
        detach(ctx, self._chains)
        self._chains = []


def attach(ctx, interface: llama_cpp.llama_sampler_i, n_seq: int) -> list:
    """Put a sampler of ``interface`` on every sequence of ``ctx`` (a chain of one each, as llama.cpp
    wants); returns the chains, for `detach`."""
    chains = []
    for sequence in range(n_seq):
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init(ctypes.byref(interface), None))
        if not llama_cpp.llama_set_sampler(ctx, sequence, chain):
            llama_cpp.llama_sampler_free(chain)
            detach(ctx, chains)
            raise RuntimeError(f"llama.cpp cannot run this sampler on the backend of sequence {sequence}")
        chains.append(chain)
    return chains


def detach(ctx, chains: list) -> None:
    """Take the samplers `attach` put on off their sequences, and free them."""
    for sequence, chain in enumerate(chains):
        llama_cpp.llama_set_sampler(ctx, sequence, None)
        llama_cpp.llama_sampler_free(chain)
