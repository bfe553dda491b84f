"""A small unigram (UGM) vocabulary as a GGUF file: llama.cpp's third tokenizer family, made for the tests.

llama.cpp runs three families of subword tokenizers: SentencePiece BPE
(Gemma), byte-level BPE (SmolLM2) and T5's unigram model (``UGM``). No small
model of the third kind ships on PyPI, so this module makes a vocabulary:
it trains a SentencePiece unigram model on a fixed list of standard-library
modules and writes it the way llama.cpp's converter writes a T5 model's
vocabulary (``convert_hf_to_gguf.py``, ``T5Model.set_vocab``): tokenizer
model ``t5``, pieces, scores, token types, the precompiled normalisation
charsmap, ``add_space_prefix``, ``remove_extra_whitespaces`` and the special
ids. It has no weights: llama.cpp opens it with ``vocab_only``, which reads
no architecture hyperparameters.

The normaliser is realistic where it can be and code-friendly where T5's is
not: NFKC from the precompiled charsmap as in T5, but ``nfkc`` rather than
T5's ``nmt_nfkc`` (which folds tabs, newlines and carriage returns into
spaces), no collapsing of whitespace runs (indentation is syntax), and no
dummy space prefix (the text before a cursor continues a document, and a
prefix would make a tail's tokens depend on where it is encoded from).
Characters the corpus never shows (tabs, CJK, emoji) have no piece: like
T5's, this tokenizer spells them ``<unk>``.

The file is built once (about six seconds of CPU to train) and cached under
`cpc.model_files.cache_dir`, named by a hash of this recipe, the corpus and the
library versions, so a changed recipe rebuilds. ``python -m
tests.support.unigram_model`` builds it and prints its path.
"""

from __future__ import annotations

import hashlib
import io
import sysconfig
from functools import cache
from importlib.metadata import version
from pathlib import Path

from cpc.model_files import cache_dir

CORPUS_MODULES = (
    "argparse.py", "ast.py", "calendar.py", "configparser.py", "contextlib.py", "csv.py",
    "dataclasses.py", "difflib.py", "doctest.py", "enum.py", "fractions.py", "functools.py",
    "inspect.py", "ipaddress.py", "optparse.py", "pickle.py", "shutil.py", "socket.py",
    "statistics.py", "subprocess.py", "textwrap.py", "threading.py", "tokenize.py",
    "traceback.py", "typing.py", "collections/__init__.py", "json/decoder.py",
    "json/encoder.py", "logging/__init__.py", "urllib/parse.py",
)
"""Standard-library files the model is trained on (paths under this interpreter's ``stdlib``)."""

LINES_PER_SENTENCE = 8
"""SentencePiece trains on sentences: runs of lines, so pieces can hold newlines (``):\\n``)."""

TRAINER_OPTIONS = {
    "model_type": "unigram",
    "vocab_size": 4000,
    "character_coverage": 1.0,
    "normalization_rule_name": "nfkc",
    "add_dummy_prefix": False,
    "remove_extra_whitespaces": False,
    "allow_whitespace_only_pieces": True,  # indentation runs become pieces of their own
    # T5's special ids, which llama.cpp's "t5" tokenizer also assumes by default.
    "pad_id": 0,
    "eos_id": 1,
    "unk_id": 2,
    "bos_id": -1,
    "num_threads": 1,  # EM sums in another order with more threads: one keeps the model the same everywhere
    "max_sentence_length": 16384,
    "minloglevel": 2,
}
SEED = 20240901


def unigram_gguf() -> Path:
    """The cached unigram GGUF file, built first if this recipe has not built it yet."""
    corpus = _corpus()
    path = cache_dir() / "models" / f"unigram-stdlib-{_recipe_hash(corpus)[:16]}.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        _write_gguf(_train(corpus), partial)
        partial.replace(path)
    return path


@cache
def _corpus() -> tuple[str, ...]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lines = "".join((stdlib / name).read_text(encoding="utf-8") for name in CORPUS_MODULES).split("\n")
    return tuple("\n".join(lines[k : k + LINES_PER_SENTENCE]) for k in range(0, len(lines), LINES_PER_SENTENCE))


def _recipe_hash(corpus: tuple[str, ...]) -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for package in ("sentencepiece", "gguf", "protobuf"):
        digest.update(f"{package}=={version(package)}".encode())
    for sentence in corpus:
        digest.update(sentence.encode("utf-8") + b"\0")
    return digest.hexdigest()


def _train(corpus: tuple[str, ...]) -> bytes:
    """The serialized SentencePiece model proto."""
    import sentencepiece

    sentencepiece.set_random_generator_seed(SEED)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=model, **TRAINER_OPTIONS)
    return model.getvalue()


def _write_gguf(model_proto: bytes, path: Path) -> None:
    """Write the vocabulary as llama.cpp's converter writes a T5 unigram model's."""
    # Imported here: the other tests import this module (through conftest) and need neither.
    import gguf
    from sentencepiece import SentencePieceProcessor, sentencepiece_model_pb2

    spec = sentencepiece_model_pb2.ModelProto()
    spec.ParseFromString(model_proto)
    processor = SentencePieceProcessor(model_proto=model_proto)
    tokens, scores, types = [], [], []
    for token_id in range(processor.vocab_size()):
        tokens.append(processor.IdToPiece(token_id).encode("utf-8"))
        scores.append(processor.GetScore(token_id))
        # The converter's order of tests.
        if processor.IsUnknown(token_id):
            types.append(gguf.TokenType.UNKNOWN)
        elif processor.IsControl(token_id):
            types.append(gguf.TokenType.CONTROL)
        elif processor.IsUnused(token_id):
            types.append(gguf.TokenType.UNUSED)
        elif processor.IsByte(token_id):
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)

    writer = gguf.GGUFWriter(path, arch="t5")
    writer.add_name("unigram-stdlib")
    writer.add_tokenizer_model("t5")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_add_space_prefix(spec.normalizer_spec.add_dummy_prefix)
    writer.add_remove_extra_whitespaces(spec.normalizer_spec.remove_extra_whitespaces)
    writer.add_precompiled_charsmap(spec.normalizer_spec.precompiled_charsmap)
    writer.add_pad_token_id(processor.pad_id())
    writer.add_eos_token_id(processor.eos_id())
    writer.add_unk_token_id(processor.unk_id())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    print(unigram_gguf())
