"""A model state's summary computed in llama.cpp's graph (backend sampling), against the host's numpy passes.

    python benchmarks/probe_backend_sampling.py [--model default] [--steps 20] [--gpu-layers N] [--json OUT]

llama.cpp (as vendored in llama-cpp-python 0.3.36) lets a sampler add ggml
ops to the model's graph (`llama_sampler_i.backend_apply`), run where the
logits are, and return a few values per output (`llama_get_sampled_*_ith`).
This probe attaches such a sampler, a chain of one, to every sequence of a
`cpc.llama.LlamaLM` and builds, per variant, what a state needs:

- ``greedy``: the normaliser of a greedy step, the ops `cpc.llama.LlamaLM`
  runs for a model on a GPU (`cpc.backend_sampling`); the host takes the
  argmax and the log-probability from it (against `cpc.lm.greedy_choice`);
- ``snapshot``: the probabilities in the prefix index's order, renormalised
  over text tokens and EOS, for the beam (`cpc.beam.Snapshot`);
- ``top-k``: ggml's own ``top_k`` of 64 ids.

For each it reports the median one-token decode with and without the
sampler (the device's extra work), what the host path spends on the same
answer, and the largest difference between the two answers. On a CPU the
graph's ops share the decode's threads, so the extra decode time is the
cost; on a GPU it is where the host's passes over the vocabulary go
(docs/gpu.md).

It also times the host's other way out: the greedy step's normaliser split
across threads (numpy releases the GIL), read right after each decode as a
request reads it, against one thread.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cpc  # noqa: E402,F401  (llama.cpp's libraries before numpy)
import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402

from cpc.backend_sampling import GGML, I64, TENSOR, attach, detach  # noqa: E402
from cpc.beam import Snapshot  # noqa: E402
from cpc.engine import Engine  # noqa: E402
from cpc.llama import LlamaLM  # noqa: E402
from cpc.lm import greedy_choice, log_normaliser  # noqa: E402
from cpc.model_files import stderr_progress  # noqa: E402

VARIANTS = ("greedy", "snapshot", "top-k")
TOP_K = 64
GGML_F32, GGML_I32 = 0, 26
PROMPT = b"import os\nimport sys\n\n\ndef main(argv):\n    for name in os.listdir(argv[1]):\n        print("


class _InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p), ("no_alloc", ctypes.c_bool)]


class ProbeGGML(GGML):
    """The product's ggml bindings (`cpc.backend_sampling`), and what the probe's other summaries need."""

    def __init__(self) -> None:
        super().__init__({
            "ggml_init": (TENSOR, _InitParams),
            "ggml_tensor_overhead": (ctypes.c_size_t,),
            "ggml_new_tensor_1d": (TENSOR, TENSOR, ctypes.c_int, I64),
            "ggml_backend_alloc_ctx_tensors_from_buft": (TENSOR, TENSOR, TENSOR),
            "ggml_backend_tensor_set": (None, TENSOR, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t),
            "ggml_soft_max": (TENSOR, TENSOR, TENSOR),
            "ggml_add": (TENSOR, TENSOR, TENSOR, TENSOR),
            "ggml_div": (TENSOR, TENSOR, TENSOR, TENSOR),
            "ggml_top_k": (TENSOR, TENSOR, TENSOR, ctypes.c_int),
        })

    def constants(self, buffer_type: int, arrays: dict[str, np.ndarray]) -> dict[str, int]:
        """Upload arrays (int32 or float32) into tensors of the backend's buffer type, once."""
        context = self.init(_InitParams(self.tensor_overhead() * len(arrays), None, True))
        tensors = {
            name: self.new_tensor_1d(context, GGML_I32 if array.dtype == np.int32 else GGML_F32, len(array))
            for name, array in arrays.items()
        }
        self.backend_alloc_ctx_tensors_from_buft(context, buffer_type)
        for name, array in arrays.items():
            self.backend_tensor_set(tensors[name], array.ctypes.data, 0, array.nbytes)
        return tensors


class Summary:
    """A custom backend sampler that writes one variant's ops into the graph."""

    def __init__(self, ggml: ProbeGGML, variant: str, order: np.ndarray, eos_ids: np.ndarray):
        self.ggml, self.variant = ggml, variant
        self._arrays = {
            "order": np.ascontiguousarray(order, dtype=np.int32),
            "eos": np.ascontiguousarray(eos_ids, dtype=np.int32),
        }
        self._tensors: dict[str, int] = {}
        self.interface = llama_cpp.llama_sampler_i()
        self._callbacks = (
            llama_cpp.llama_sampler_i_name(lambda sampler: b"cpc-summary"),
            llama_cpp.llama_sampler_i_apply(lambda sampler, candidates: None),
            llama_cpp.llama_sampler_i_backend_init(self._init),
            llama_cpp.llama_sampler_i_backend_apply(self._apply),
        )
        interface = self.interface
        interface.name, interface.apply, interface.backend_init, interface.backend_apply = self._callbacks

    def _init(self, sampler, buffer_type, n_outputs) -> bool:
        if not self._tensors:
            self._tensors = self.ggml.constants(buffer_type, self._arrays)
        return True

    def _apply(self, sampler, context, graph, data) -> None:
        g, out = self.ggml, data.contents
        n = g.nelements(out.logits)
        logits = g.reshape_1d(context, out.logits, n)
        if self.variant == "top-k":
            out.candidates = g.top_k(context, logits, TOP_K)
        elif self.variant == "greedy":
            self._greedy(context, logits, n, out)
        else:
            self._snapshot(context, logits, n, out)

    def _greedy(self, context: int, logits: int, n: int, out) -> None:
        """The product's ops: the row's maximum and ``log(sum(exp(logits - maximum)))``; the row passes on."""
        out.probs = self.ggml.normaliser(context, logits)

    def _snapshot(self, context: int, logits: int, n: int, out) -> None:
        """Probabilities in index order, then EOS, renormalised over the two."""
        g, tensors = self.ggml, self._tensors
        probs = g.reshape_2d(context, g.soft_max(context, logits), 1, n)
        text = g.reshape_1d(context, g.get_rows(context, probs, tensors["order"]), len(self._arrays["order"]))
        eos = g.sum(context, g.get_rows(context, probs, tensors["eos"]))
        total = g.add(context, g.sum(context, text), eos)
        out.probs = g.concat(context, g.div(context, text, total), g.div(context, eos, total), 0)


def read(lm: LlamaLM, variant: str, banned: np.ndarray) -> np.ndarray:
    """The sampled answer of the last decode's one output."""
    ctx = lm._ctx
    if variant == "greedy":
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_sampled_logits_ith(ctx, 0), (lm.n_vocab,))
        maximum, log_sum = np.ctypeslib.as_array(llama_cpp.llama_get_sampled_probs_ith(ctx, 0), (2,))
        token = int(logits.argmax())
        return np.array([token if not banned[token] else -1, float((logits[token] - maximum) - log_sum)])
    if variant == "snapshot":
        count = llama_cpp.llama_get_sampled_probs_count_ith(ctx, 0)
        return np.ctypeslib.as_array(llama_cpp.llama_get_sampled_probs_ith(ctx, 0), (count,)).copy()
    count = llama_cpp.llama_get_sampled_candidates_count_ith(ctx, 0)
    ids = np.ctypeslib.as_array(llama_cpp.llama_get_sampled_candidates_ith(ctx, 0), (count,)).copy()
    return np.sort(ids)


def decode_after(lm: LlamaLM, sequence: int, length: int, token: int) -> float:
    """Decode ``token`` at position ``length`` of a sequence cut back to ``length`` tokens, its output asked
    for (batch entry 0); returns the ms it took."""
    llama_cpp.llama_memory_seq_rm(lm._memory, sequence, length, -1)
    lm._fill([(token, length, sequence, 0)])
    started = time.perf_counter()
    lm._decode()
    return (time.perf_counter() - started) * 1000


def step_ms(lm: LlamaLM, sequence: int, length: int, steps: int) -> float:
    """Median one-token decode after the prompt, each with its output."""
    return statistics.median(decode_after(lm, sequence, length, 1000 + token) for token in range(steps))


def host_answer(engine: Engine, logits: np.ndarray, variant: str, banned: np.ndarray) -> tuple[np.ndarray, float]:
    """The host path's answer from the raw logits, and its median ms."""
    scratch = np.empty_like(logits)
    index = engine.conditioner.beam.index
    eos_ids = np.asarray(sorted(engine.vocab.eos_ids))

    def snapshot() -> np.ndarray:
        made = Snapshot((), logits, index, eos_ids)
        return np.append(made.in_order(0, len(index)), made.eos)

    work = {
        "greedy": lambda: np.array(greedy_choice(logits, banned, scratch)),
        "snapshot": snapshot,
        "top-k": lambda: np.sort(np.argpartition(logits, len(logits) - TOP_K)[len(logits) - TOP_K :]),
    }[variant]
    times = []
    for _ in range(20):
        started = time.perf_counter()
        answer = work()
        times.append((time.perf_counter() - started) * 1000)
    return answer, statistics.median(times)


def split_normaliser_ms(lm: LlamaLM, sequence: int, length: int, steps: int, threads: int) -> dict:
    """Median ms of the greedy normaliser right after a decode, on one thread and split across ``threads``."""
    scratch = np.empty(lm.n_vocab, dtype=np.float32)
    bounds = np.linspace(0, lm.n_vocab, threads + 1).astype(int)

    def part(logits: np.ndarray, maximum: np.float32, lo: int, hi: int) -> float:
        piece = scratch[lo:hi]
        np.subtract(logits[lo:hi], maximum, out=piece)
        return float(np.exp(piece, out=piece).sum(dtype=np.float64))

    times: dict[str, list[float]] = {"one_thread_ms": [], "split_ms": []}
    with ThreadPoolExecutor(threads) as pool:
        for step in range(steps):
            for way in times:
                decode_after(lm, sequence, length, 1000 + step)
                logits = lm._logits(0)
                started = time.perf_counter()
                maximum = logits.max()
                if way == "split_ms":
                    parts = [pool.submit(part, logits, maximum, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
                    sum(future.result() for future in parts)
                else:
                    log_normaliser(logits, scratch, maximum)
                times[way].append((time.perf_counter() - started) * 1000)
    return {"threads": threads, **{way: statistics.median(values) for way, values in times.items()}}


def difference(device: np.ndarray, host: np.ndarray, variant: str) -> float:
    """The largest difference of values; for top-k, how many ids only one side has; inf for another token."""
    if variant == "top-k":
        return float(len(set(device.tolist()) ^ set(host.tolist())))
    if variant == "greedy" and int(device[0]) != int(host[0]):
        return float("inf")
    return float(np.max(np.abs(device.astype(np.float64) - host.astype(np.float64))))


def probe(engine: Engine, steps: int) -> dict:
    lm = engine.lm
    if lm.backend_greedy:  # a model on a GPU: the probe puts its own samplers on, and times without any
        lm._greedy_summary.detach(lm._ctx)
        lm._greedy_summary = None
    ggml = ProbeGGML()
    prompt = lm.bos + tuple(engine.tokenizer.encode(PROMPT))
    state, last = prompt[:-1], prompt[-1]
    eos_ids = np.asarray(sorted(engine.vocab.eos_ids))
    banned = engine.vocab.special.copy()
    banned[eos_ids] = False
    lm.reset()
    lm._evaluate([state], None)
    sequence = next(k for k, slot in enumerate(lm._slots) if len(slot) == len(state))
    decode_after(lm, sequence, len(state), last)
    logits = lm._logits(0).copy()
    plain = step_ms(lm, sequence, len(state), steps)
    result = {"model": engine.vocab.name, "vocabulary": int(lm.n_vocab), "step_ms_without": plain, "variants": {}}
    for number, variant in enumerate(VARIANTS):
        host, host_ms = host_answer(engine, logits, variant, banned)
        summary = Summary(ggml, variant, engine.conditioner.beam.index.order, eos_ids)  # kept: its callbacks
        chains = attach(lm._ctx, summary.interface, lm.n_seq)
        decode_after(lm, sequence, len(state), last)
        device = read(lm, variant, banned)
        with_sampler = step_ms(lm, sequence, len(state), steps)
        detach(lm._ctx, chains)
        result["variants"][variant] = {
            "step_ms_with": with_sampler, "extra_decode_ms": with_sampler - plain, "host_ms": host_ms,
            "largest_difference": difference(device, host, variant),
        }
        stderr_progress(f"variant {variant}", (number + 1) / len(VARIANTS))
    result["host_split"] = split_normaliser_ms(lm, sequence, len(state), steps, min(8, os.cpu_count() or 1))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--gpu-layers", type=int, default=0, help="model layers on the GPU (-1: all)")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    engine = Engine.load(args.model, gpu_layers=args.gpu_layers, progress=stderr_progress)
    result = probe(engine, args.steps)
    print(f"{result['model']}, {result['vocabulary']} logits; one-token decode {result['step_ms_without']:.2f} ms")
    print(f"{'variant':10} {'decode+ ms':>10} {'host ms':>8} {'largest difference':>19}")
    for variant, row in result["variants"].items():
        print(f"{variant:10} {row['extra_decode_ms']:10.2f} {row['host_ms']:8.3f} {row['largest_difference']:19.3g}")
    split = result["host_split"]
    print(f"greedy normaliser after a decode: {split['one_thread_ms']:.3f} ms on one thread, "
          f"{split['split_ms']:.3f} ms split across {split['threads']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
