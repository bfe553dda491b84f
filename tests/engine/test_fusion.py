"""Fusion: the n-gram cache, the identifier model, the corpus's counts, and fusion in generation."""

from __future__ import annotations

import math
from collections import Counter

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cpc import ngram
from cpc.fusion import MIN_PULL, FusionWeights, ProjectCorpus
from cpc.identifiers import (
    BONUS, MIN_CAP, PENALTY, STAKE_CAP, IdentifierModel, NameCounts, TokenShapes, language_names, names_in,
)
from cpc.syntax import (
    ASSIGNMENT, C_LIKE, DART, DEFINE, GO, PROSE, PYTHON, RUST, START, TYPES_FIRST, USE, Place, Syntax,
)
from cpc.ngram import DISCOUNT, SCALE, DocumentCounts, FileCounts, Merged, NGramModel, WithoutLine, ngram_counts, unchanged_ends
from cpc.tokenizer import TiktokenTokenizer
from tests.support.strategies import code_text, examples


@pytest.fixture(scope="module")
def cl100k() -> TiktokenTokenizer:
    return TiktokenTokenizer()


# --- the n-gram cache ---------------------------------------------------------------------------


def test_ngrams_use_only_the_context_there_is():
    assert ngram_counts([5, 6], 0, 3) == {((), 5): 1, ((), 6): 1, ((5,), 6): 1}


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 3), max_size=30), st.integers(0, 30), st.integers(1, 5))
def test_ngram_counts_are_the_pairs_counted_one_by_one(tokens, first, order):
    pairs = Counter(
        (tuple(tokens[position - length : position]), tokens[position])
        for position in range(first, len(tokens)) for length in range(min(order - 1, position) + 1)
    )
    assert ngram_counts(tokens, first, order) == pairs


def test_counts_and_backoff_match_a_hand_computed_example():
    counts = DocumentCounts(order=3)
    counts.update([(1, 2, 3), (1, 2, 4), (1, 2, 3)])  # 1 2 3 1 2 4 1 2 3
    assert counts.continuations((1, 2)) == ({3: 2, 4: 1}, 3)
    assert counts.continuations((2,)) == ({3: 2, 4: 1}, 3)
    assert counts.continuations((3, 1)) == ({2: 1}, 1)
    assert counts.continuations((1,)) == ({2: 3}, 3)
    assert counts.continuations((9,)) == ({}, 0)
    model = NGramModel([(counts, 1.0)], vocabulary_size=10, order=3)
    # Context (1, 2): 3 keeps (2 - D)/3, 4 keeps (1 - D)/3, and D·2/3 goes to context (2,),
    # which shares it out the same way; what it passes on in turn goes to no token.
    passed_on = DISCOUNT * 2 / 3
    expected = {
        3: (2 - DISCOUNT) / 3 + passed_on * (2 - DISCOUNT) / 3,
        4: (1 - DISCOUNT) / 3 + passed_on * (1 - DISCOUNT) / 3,
    }
    found = model.probabilities((1, 2))
    assert found.keys() == expected.keys()
    for token, probability in expected.items():
        assert found[token] == pytest.approx(probability)
    tokens, scores = model.scored((1, 2))
    assert dict(zip(tokens.tolist(), scores.tolist())) == pytest.approx(
        {token: math.log1p(SCALE * probability) for token, probability in expected.items()}, rel=1e-6)
    assert model.score((1, 2), 3) == scores[tokens.tolist().index(3)] and model.score((1, 2), 5) == 0.0
    # An unseen longest context passes everything to the shorter one.
    assert model.probabilities((7, 2)) == pytest.approx({3: (2 - DISCOUNT) / 3, 4: (1 - DISCOUNT) / 3})
    # No evidence at all: every token scores 0.
    assert not len(model.scored((7, 8))[0])


def test_scopes_mix_by_weight_and_empty_scopes_give_theirs_away():
    near, far = DocumentCounts(order=2), DocumentCounts(order=2)
    near.update([(1, 2)])
    far.update([(1, 3)])
    model = NGramModel([(near, 0.75), (far, 0.25), (DocumentCounts(order=2), 5.0)], 10, order=2)
    found = model.probabilities((1,))
    assert found[2] == pytest.approx(0.75 * (1 - DISCOUNT))
    assert found[3] == pytest.approx(0.25 * (1 - DISCOUNT))


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=6), min_size=1, max_size=8), st.data())
def test_file_tables_answer_like_document_counts(lines, data):
    document = DocumentCounts(order=4)
    document.update([tuple(line) for line in lines])
    files = FileCounts(order=4)
    files.add("a", [token for line in lines for token in line])
    files.commit()
    context = tuple(data.draw(st.lists(st.integers(0, 6), max_size=3)))
    assert files.continuations(context) == document.continuations(context)


_FILE_TOKENS = st.lists(st.integers(0, 4), max_size=12)


@pytest.mark.parametrize("share", [1.0, 0.0], ids=["changes counted alone", "every commit counts all"])
@settings(max_examples=examples(60), deadline=None)
@given(st.dictionaries(st.sampled_from("abcd"), _FILE_TOKENS, max_size=4),
       st.lists(st.lists(st.tuples(st.sampled_from("abcde"), st.none() | _FILE_TOKENS), max_size=3), max_size=4),
       st.lists(st.integers(0, 4), max_size=3))
def test_files_changed_after_a_full_count_answer_like_a_full_count(share, first, rounds, context):
    """Files added, read again or removed after the full count, committed round after round (counted alone
    into the side tables, or everything counted again), answer every context as a full count of the files
    as they are now."""
    with mock.patch.object(ngram, "REBUILD_SHARE", share):
        check_commits(first, rounds, context)


def check_commits(first: dict[str, list[int]], rounds: list, context: list[int]) -> None:
    files, now = FileCounts(order=3), dict(first)
    for path, tokens in first.items():
        files.add(path, tokens)
    files.commit()
    for changes in rounds:
        for path, tokens in changes:  # None: the file is deleted
            if tokens is None:
                files.remove(path)
                now.pop(path, None)
            else:
                files.add(path, tokens)
                now[path] = tokens
        files.commit()
        full = FileCounts(order=3)
        for path, tokens in now.items():
            full.add(path, tokens)
        full.commit()
        for length in range(len(context) + 1):
            assert files.continuations(tuple(context[:length])) == full.continuations(tuple(context[:length]))
        assert files.empty == full.empty


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 2), max_size=300), st.lists(st.tuples(st.integers(0, 300), st.integers(0, 3),
                                                                  st.lists(st.integers(0, 2), max_size=3)), max_size=3))
@example([0] * 130, [(64, 0, [1])])  # a change at a chunk's first line
@example([0] * 128, [(128, 0, [0])])  # a line added at the end: everything matches up to the shorter one
def test_unchanged_ends_are_the_items_compared_one_by_one(old, edits):
    new = list(old)
    for at, removed, inserted in edits:
        at = min(at, len(new))
        new[at : at + removed] = inserted
    limit, head, tail = min(len(old), len(new)), 0, 0
    while head < limit and old[head] == new[head]:
        head += 1
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    assert unchanged_ends(old, new) == unchanged_ends(tuple(old), tuple(new)) == (head, tail)


def test_without_line_leaves_out_every_ngram_of_the_cursor_line():
    counts = DocumentCounts(order=3)
    counts.update([(1, 2, 0), (7, 8, 0), (1, 2, 0)])
    view = WithoutLine(counts, 1)
    assert view.continuations((7,)) == ({}, 0)
    assert view.continuations((0,)) == ({}, 0)  # 0 -> 7 and line 1's 0 -> 1 are gone
    assert view.continuations((2,)) == ({0: 2}, 2)  # lines 0 and 2 keep their 2 -> 0
    assert view.continuations(()) == ({1: 2, 2: 2, 0: 2}, 6)  # line 2's tokens stay
    assert view.continuations((0, 1)) == ({}, 0)
    assert Merged([view, counts]).continuations((1, 2)) == ({0: 4}, 4)


def _apply(text: str, start: int, end: int, insert: str) -> str:
    start, end = sorted((min(start, len(text)), min(end, len(text))))
    return text[:start] + insert + text[end:]


edits = st.lists(
    st.tuples(st.integers(0, 400), st.integers(0, 400), st.lists(code_text, max_size=3).map("\n".join)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(code_text, max_size=12).map("\n".join), edits)
@example("a\nb\nc", [(2, 3, "x\ny"), (0, 0, "\n")])
@example("a\n" + "x" * 1000, [(1002, 1002, "y"), (1, 1, "\nz"), (1004, 1004, "\n")])  # a line grown long, split
def test_incremental_updates_equal_a_rebuild(cl100k, text, steps):
    live = ProjectCorpus(cl100k, order=4)
    live.update_document("doc", text)
    for start, end, insert in steps:
        text = _apply(text, start, end, insert)
        live.update_document("doc", text)
    rebuilt = ProjectCorpus(cl100k, order=4)
    rebuilt.update_document("doc", text)
    assert live.documents["doc"].counts.counts == rebuilt.documents["doc"].counts.counts
    assert live.documents["doc"].names == rebuilt.documents["doc"].names  # Counter equality: a 0 equals a missing name,
    assert min(live.documents["doc"].names.values(), default=1) > 0  # so no name may be left at 0 either
    assert live.names.counts == rebuilt.names.counts
    assert live.names.sorted == rebuilt.names.sorted
    assert live.names.support == rebuilt.names.support
    assert np.array_equal(live.names.leads, rebuilt.names.leads)
    live.close_document("doc")
    fresh = ProjectCorpus(cl100k, order=4)  # it knows the language's own names (and nothing more)
    assert live.names.counts == fresh.names.counts and live.names.sorted == fresh.names.sorted
    assert live.names.support == fresh.names.support and np.array_equal(live.names.leads, fresh.names.leads)


def test_a_long_line_is_counted_as_an_empty_one(cl100k):
    """Minified code or data: its tokens are not what anyone types, and a key on it would count it again."""
    bundle = "function f(a){return a.map(b=>b+1)};" * 40
    corpus, plain = ProjectCorpus(cl100k, order=4), ProjectCorpus(cl100k, order=4)
    corpus.update_document("doc", "x = 1\n" + bundle + "\ny = 2\n" + bundle)
    plain.update_document("doc", "x = 1\n\ny = 2\n")
    assert corpus.documents["doc"].counts.counts == plain.documents["doc"].counts.counts
    assert corpus.names.counts == plain.names.counts
    assert len(corpus.documents["doc"].texts) == 4  # the cursor's line number still names its line
    corpus.add_file("bundle.min.js", bundle)
    corpus.commit()
    assert corpus.files.tokens == 0


# --- the identifier model -----------------------------------------------------------------------

TOY_PIECES = [b"comp", b"ute", b"uted", b"_", b"x", b"s", b"(", b" ", b" comp", b"ute(", b"\n", b"c", b"o", b"m", b"p", b"u", b"t", b"e", b" :="]
TOY_NAMES = [b"compute", b"compute_x", b"comp_s", b"x", b"cox"]


TOY_LANGUAGE = (b"comp", b"cut", b"xo", b"x")
"""Names of the toy's language: ``x`` the project uses too; the others are `IdentifierModel.borrowed`."""


def toy_model(language: tuple[bytes, ...] = ()) -> IdentifierModel:
    names = NameCounts(TokenShapes(TOY_PIECES), base=Counter(dict.fromkeys(language, 1)))
    names.add(names_in(b" ".join(TOY_NAMES)))
    return IdentifierModel(names, syntax=PYTHON)


@pytest.fixture(scope="module", params=[(), TOY_LANGUAGE], ids=["project names", "and language names"])
def toy_identifiers(request) -> IdentifierModel:
    return toy_model(request.param)


def _words(data: bytes) -> list[tuple[int, int]]:
    """Spans of maximal runs of identifier bytes."""
    spans, start = [], None
    for position, byte in enumerate(data + b" "):
        inside = chr(byte).isalnum() or byte in b"_$" or byte >= 0x80
        if inside and start is None:
            start = position
        elif not inside and start is not None:
            spans.append((start, position))
            start = None
    return spans


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from([b"", b"x = ", b"x = comp", b"x = co", b"y = compz", b"def ", b"def comp", b"for x, co"]),
       st.lists(st.integers(0, len(TOY_PIECES) - 1), max_size=10))
@example(b"x = comp", [1, 3, 4, 6])  # compute_x(
@example(b"x = comp", [1, 3, 5, 6])  # compute_s( : started, not finished
@example(b"x = ", [8, 5, 7])  # " comp", "s", " ": a word that leaves the names
@example(b"y = compz", [1, 6])  # the user's own new word pays nothing
@example(b"", [8, 5, 7])  # the same new word at a statement's start, then a blank: it may be assigned, so no penalty
@example(b"", [8, 5, 6])  # ... then "(": a call of a name that does not exist, so the penalty
@example(b"x = (", [10, 8, 5, 7])  # after a line break too
@example(b"def comp", [1, 6, 4])  # a new name that is a project's: it earns, then so does a parameter ("x")
@example(b"def comp", [5, 6])  # a new name that leaves the names: it gives back what it earned, and pays nothing
def test_a_word_keeps_its_bonus_only_when_it_ends_on_a_name(toy_identifiers, typed, tokens):
    """Scores along any token path, plus `final`, add up to what the words that end as the project's names
    earned, less the penalty for each word used (`cpc.syntax.USE`) that was seen to leave every name (the
    language's included), and for each statement's first word (`cpc.syntax.START`) that did and then ended
    on something other than an assignment.

    So a name that is started and not finished nets exactly zero (the refund), and so does one that ends on
    a language name the project does not use; but a typed word on the way to a project's name that does not
    end as one also gives back its typed bytes (at most `STAKE_CAP`), which earned nothing.
    """
    model = toy_identifiers
    own = set(TOY_NAMES)
    known = own | set(model.borrowed)

    def leads(word: bytes) -> bool:
        return any(name.startswith(word) for name in known)

    total, state = model.start(typed)
    for token in tokens:
        total += float(model.row(state)[token])
        state = model.next_state(state, token)
    total += float(model.final([state])[0])
    text = typed + b"".join(TOY_PIECES[t] for t in tokens)
    spans, offset = [], len(typed)  # each generated token's byte span
    for token in tokens:
        spans.append((offset, offset + len(TOY_PIECES[token])))
        offset = spans[-1][1]
    expected = 0.0
    for start, end in _words(text):
        role = Place.of(text[:start], model.syntax).role()
        ending = next((hi for lo, hi in spans if lo <= end < hi), None)  # where the token that ends the word ends
        assigned = ending is None or ASSIGNMENT.match(text[end:ending]) is not None
        penalty = PENALTY if role == USE or (role == START and not assigned) else 0.0
        if role == PROSE:
            continue
        if end == len(typed) < len(text) and leads(text[start:end]) and text[start:end] not in known:
            expected -= penalty  # the typed word, ended on no name by the first token
        typed_part = text[start : len(typed)] if start < len(typed) else b""
        if typed_part and role == USE and any(name.startswith(typed_part) for name in own) and text[start:end] not in own:
            expected -= BONUS * min(len(typed_part), STAKE_CAP)  # the typed bytes were at stake
        if end <= len(typed) or (start < len(typed) and not leads(text[start : len(typed)])):
            continue  # typed, or the user's own word
        tokens_in = [(lo, hi) for lo, hi in spans if lo < end and hi > start]
        # Judged at the end of each token in the word (on the way to a name?) and where it ends (a name?),
        # unless one token starts and ends it inside.
        if start >= len(typed) and len(tokens_in) == 1 and end < tokens_in[0][1]:
            continue
        checks = [text[start:hi] if hi <= end else None for _, hi in tokens_in]
        leaves = any(leads(so_far) is False for so_far in checks if so_far is not None)
        if end < len(text) and text[start:end] not in known:
            leaves = True
        expected -= penalty * leaves
        if text[start:end] not in own:
            continue
        # The typed bytes and a word's first token earn nothing; the others earn their bytes in the word,
        # at most the shortest rest of a project's name that starts with the word so far (and at least MIN_CAP).
        inside = [(max(lo, start), min(hi, end)) for lo, hi in tokens_in]
        for lo, hi in inside if start < len(typed) else inside[1:]:
            so_far = text[start:lo]
            cap = min(len(n) - len(so_far) for n in own if n.startswith(so_far) and len(n) > len(so_far))
            expected += BONUS * min(hi - lo, max(MIN_CAP, cap))
    assert total == pytest.approx(expected)


def test_rows_agree_with_the_steps(toy_identifiers):
    model = toy_identifiers
    for typed in (b"", b"x = comp", b"x = compute", b"(compz", b"x = co", b"(", b"x = c", b"x = cu", b"    comp"):
        _, state = model.start(typed)
        row = model.row(state)
        for token in range(len(TOY_PIECES)):
            assert row[token] == pytest.approx(model._step(state, TOY_PIECES[token], token)[0]), (typed, TOY_PIECES[token])


def test_the_word_at_the_cursor_is_no_name():
    names = NameCounts(TokenShapes(TOY_PIECES))
    names.add(names_in(b"compute x"))
    model = IdentifierModel(names, left_out=names_in(b"compute"))
    _, state = model.start(b"= comp")
    assert state[:3] == (None, 0.0, "")
    assert IdentifierModel(names).start(b"= comp")[1][:2] == (b"comp", 4.0)  # its 4 typed bytes at stake
    comp = TOY_PIECES.index(b" comp")  # a word no name left in the snapshot starts: the penalty
    after = model.start(b"=")[1]
    assert model.row(after)[comp] == -PENALTY == model._step(after, b" comp", comp)[0]
    assert IdentifierModel(names).row(model.start(b"=")[1])[comp] == 0.0


@pytest.mark.parametrize("typed, role", [
    (b"x = f(comp", USE),  # a use: a word that leaves every name pays, and gives back its typed bytes
    (b"    comp", START),  # a statement's first word may be a new name: it earns, and pays only if no assignment follows
    (b"def comp", DEFINE), (b"for x, comp", DEFINE), (b"def f(a, comp", DEFINE),  # new names: they earn, never pay
    (b"x = 1  # comp", PROSE), (b"x = 'comp", PROSE),  # not names: not judged
])
def test_where_a_word_starts_decides_how_it_is_judged(typed, role):
    model = toy_model()
    state = model.start(typed)[1]
    row = model.row(state)
    leave, spell = TOY_PIECES.index(b"s"), TOY_PIECES.index(b"ute")  # "comps" leaves the names, "compute" is one
    if role == USE:
        assert (row[leave], row[spell]) == (-PENALTY - BONUS * len(b"comp"), BONUS * MIN_CAP)
    elif role == START:
        assert (row[leave], row[spell]) == (0.0, BONUS * MIN_CAP)
        called, assigned = TOY_PIECES.index(b"("), TOY_PIECES.index(b" ")  # "comp(": no such name; "comp =" may be new
        declared = TOY_PIECES.index(b" :=")  # Go's declaration, Python's walrus
        assert (row[called], row[assigned], row[declared]) == (-PENALTY, 0.0, 0.0)
    elif role == DEFINE:
        assert (row[leave], row[spell], row[TOY_PIECES.index(b"(")]) == (0.0, BONUS * MIN_CAP, 0.0)
    else:
        assert not row.any() and state[0] is None


@pytest.mark.parametrize("name, typed, role", [
    # a type before the name (C, C++, Java, C#): the word after a declaration's type is a new name
    ("Main.java", b"    int ", DEFINE), ("Main.java", b"    final List<String> ", DEFINE),
    ("a.c", b"static const char *", DEFINE), ("a.cpp", b"    for (const auto& ", DEFINE),
    ("a.cpp", b"    std::vector<int> ", DEFINE), ("Main.java", b"    public void run(String[] ", DEFINE),
    ("Main.java", b"  @Override public ", DEFINE), ("a.c", b"    struct node *", DEFINE),
    # ... not after a keyword that an expression follows, a struct's tag, an argument, an operand
    ("Main.java", b"    return ", USE), ("Main.java", b"    throw new ", USE), ("a.c", b"    else ", USE),
    ("a.c", b"    struct ", USE), ("a.c", b"    case ", USE), ("Main.java", b"    foo(a, ", USE),
    ("Main.java", b"    x = y ", USE), ("Main.java", b"    if (", USE), ("Main.java", b"    System.out.", START),
    # the names after a declaration's first, and its initial values; a caught exception's type, then its name
    ("a.c", b"    int a, ", DEFINE), ("a.c", b"    static char buf[64] = {0}, *", DEFINE),
    ("Main.java", b"    Map<K, V> m = new HashMap<>(), ", DEFINE), ("a.c", b"    x = f(a, ", USE),
    ("Main.java", b"    void run(int a, ", USE), ("Main.java", b"    } catch (", USE),
    ("Main.java", b"    } catch (IOException ", DEFINE), ("app.js", b"    } catch (", DEFINE),
    ("a.cpp", b"template <typename ", DEFINE), ("a.cpp", b"template <typename T, typename ", DEFINE),
    ("a.cpp", b"    typename ", USE),
    # the name before its type (Go, Rust, Kotlin, Swift): a parameter's name is new, its type is not
    ("main.go", b"func (", DEFINE), ("main.go", b"func (s *Server) ", DEFINE),
    ("main.go", b"func (s *Server) Get(ctx context.Context, ", DEFINE), ("main.go", b"func parse(text ", USE),
    ("main.go", b"\tfor i, ", DEFINE), ("main.go", b"\tfor i, v := range ", USE), ("main.go", b"type ", DEFINE),
    ("main.go", b"\tint ", USE), ("lib.rs", b"fn area(width: u32, ", DEFINE), ("lib.rs", b"fn area(width: ", USE),
    ("main.go", b"\tif v, ", START), ("main.go", b"\t} else if ", START), ("main.go", b"\tswitch ", START),
    ("main.go", b"\tif err := f(); ", USE), ("app.py", b"    if ", USE), ("app.js", b"    if (", USE),
    ("lib.rs", b"    pub fn new(&mut ", DEFINE), ("lib.rs", b"    let mut ", DEFINE), ("lib.rs", b"    xs.map(|", DEFINE),
    ("a.kt", b"fun area(", DEFINE), ("a.kt", b"    val ", DEFINE),
    # a pattern's names (Rust), Dart's untyped catch and its stack trace
    ("lib.rs", b"    if let Some(", DEFINE), ("lib.rs", b"    while let Ok((a, ", DEFINE), ("lib.rs", b"    let (a, ", DEFINE),
    ("lib.rs", b"    let x = f(", USE), ("main.dart", b"  } catch (", DEFINE), ("main.dart", b"  } catch (e, ", DEFINE),
    ("main.dart", b"  final int ", DEFINE), ("main.dart", b"  } on FormatException catch (", DEFINE),
    # Rust's ' is a lifetime (code) or a character literal, never a string left open
    ("lib.rs", b"    let s: &'static str = ", USE), ("lib.rs", b"fn get<'a>(map: &'a Map, ", DEFINE),
    ("lib.rs", b"    fn read(&mut self, buf: &'a mut [u8], ", DEFINE), ("lib.rs", b"    let quote = '\"'; let ", DEFINE),
    ("lib.rs", b"    let c = '\\''; let ", DEFINE), ("lib.rs", b"    let s = \"it's ", PROSE),
    ("lib.rs", b"    let e = '\xc3\xa9'; // the ", PROSE), ("lib.rs", b"pub struct Parser<'a> { pos: usize, ", USE),
    ("lib.rs", b"    where T: 'static + Send, U: ", USE),
    # Java's text blocks and Dart's strings in three quotes span lines
    ("Main.java", b'    String s = """\n        the ', PROSE), ("Main.java", b'    String s = """\n  a\n  """; int ', DEFINE),
    ("main.dart", b"  var s = '''\n  the ", PROSE), ("main.dart", b"  var s = '''a'''; var ", DEFINE),
    # Go's backquoted strings take no escapes
    ("main.go", b"\tname = strings.ReplaceAll(name, `\\`, ", USE), ("main.go", b"\tre := `a\\`+`b ", PROSE),
    # Rust's raw strings end at their own quote and #s, with no escapes; its strings span lines
    ("lib.rs", b'    let s = r#"say "hi" ', PROSE), ("lib.rs", b'    let s = r#"say "hi""#; let ', DEFINE),
    ("lib.rs", b'    let p = r"C:\\"; let ', DEFINE), ("lib.rs", b'    let b = br##"a "# b"##; let ', DEFINE),
    ("lib.rs", b'    let s = "one\n    two ', PROSE), ("lib.rs", b'    let s = "one\\\n    two"; let ', DEFINE),
    # a call of something named like a keyword is a call; `for ... of` ends its targets as `for ... in` does
    ("app.py", b"    result = func(a, ", USE), ("app.js", b"    fn(a, ", USE), ("app.js", b"    for (const item of ", USE),
    ("app.py", b"    int ", USE),
])
def test_new_names_are_read_in_each_language_s_declarations(name, typed, role):
    """Where a declaration brings a name in, by the language's way of writing it (`Syntax.of` the file's name):
    there the identifier model judges no word, so a new local name is not pushed towards a known one."""
    assert Place.of(typed, Syntax.of(name)).role() == role


_DELIMITED = st.lists(
    st.sampled_from([b'"""', b"'''", b'"', b"'", b"`", b"#", b"//", b"/*", b"*/", b"\\", b"\n", b"x", b" ", b"def ", b"r"]),
    max_size=40,
).map(b"".join)


@settings(max_examples=examples(300), deadline=None)
@given(_DELIMITED, st.sampled_from([PYTHON, C_LIKE, TYPES_FIRST, DART, RUST, GO]))
def test_a_place_read_on_from_its_line_start_is_the_place_read_from_the_start(text, syntax):
    """`Place.of` keeps the place where a text's last line starts and reads only that line again: as a
    keystroke after another would, every prefix of the text gives what one read from its start gives."""
    for end in range(len(text) + 1):
        assert Place.of(text[:end], syntax) == Place(syntax).after(text[:end]), text[:end]


@settings(max_examples=examples(300), deadline=None)
@given(_DELIMITED, st.lists(st.integers(0, 40), max_size=6), st.sampled_from([PYTHON, C_LIKE, TYPES_FIRST, DART, RUST, GO]))
@example(b'let s = r#"a "b" c"# + x', [7, 9], RUST)  # the default model's tokens: ` r`, `#"`
@example(b"if c == '\"' { x", [7, 10], RUST)  # ` '"`, `'`
@example(b'x = """doc', [6], PYTHON)  # `""`, `"`
@example(b'"a\\" + x', [3], C_LIKE)  # an escape's backslash, then its quote
@example(b"/* a */ x", [6], C_LIKE)  # a comment's closer split
def test_a_text_read_in_pieces_is_read_as_a_whole(text, cuts, syntax):
    """The decoder reads a suggestion a token at a time, and a token may end inside a delimiter, a character
    literal or an escape: each piece read on from the place before gives the place the whole text gives."""
    place, start = Place(syntax), 0
    for end in sorted({min(cut, len(text)) for cut in cuts} | {len(text)}):
        place, start = place.after(text[start:end]), end
    assert place == Place(syntax).after(text)


def test_the_language_s_own_names_are_known(cl100k):
    """A small file uses names it never defines: builtins and their members are names, so they pay no penalty;
    they earn no bonus either, unless the project uses them: the bonus is for the project's names."""
    corpus = ProjectCorpus(cl100k)
    corpus.update_document("file:///a.py", "items = enumerate(rows)\n")
    fusion = corpus.fusion("file:///b.py")
    for text, good, earns in ((b"x = enumer", b"ate", True), (b"y = s.starts", b"with", False), (b"y = arr.for", b"Each", False)):
        _, state = fusion.identifiers.start(text)
        row = fusion.identifiers.row(state)
        assert state[0] == text.rpartition(b".")[2].rpartition(b" ")[2]
        assert (row[cl100k.encode(good)[0]] > 0) == earns and row[cl100k.encode(good)[0]] >= 0
        assert row[cl100k.encode(b"qzx")[0]] < 0, "a word that leaves every name still pays"


# --- fusion over a real tokenizer ---------------------------------------------------------------

LIB = "import zlib\n\ndef compute_weighted_checksum(data, weights):\n    total = 0\n    return zlib.crc32(bytes([total % 256]))\n"
MAIN = "from lib import *\n\ndef main(values):\n    result = compute_wei"


def project(tokenizer) -> ProjectCorpus:
    """A corpus with a project's worth of text: `LIB` among real modules."""
    import json

    corpus = ProjectCorpus(tokenizer)
    for path in sorted(Path(json.__file__).parent.glob("*.py")):
        corpus.add_file(path.name, path.read_text())
    corpus.add_file("lib.py", LIB)
    corpus.commit()
    return corpus


def test_batched_advance_equals_one_at_a_time(cl100k):
    corpus = project(cl100k)
    corpus.update_document("main.py", MAIN)
    fusion = corpus.fusion("main.py", FusionWeights(0.7, 0.4), cursor_line=3)
    context = tuple(cl100k.encode(MAIN[: -len("compute_wei")].encode()))
    path = tuple(cl100k.encode(b" compute_wei"))
    _, states = fusion.init_states(context, MAIN.encode(), [(path, b""), ((), b""), (path[:1], b"")])
    batched, next_states = fusion.advance(states)
    for number, state in enumerate(states):
        alone, alone_next = fusion.advance([state])
        assert np.array_equal(batched[number], alone[0])
        for token in (0, int(batched[number].argmax()), 100):
            assert next_states[number, token] == alone_next[0, token]
    in_word = np.where(corpus.shapes.breaks, -np.inf, batched[0])
    best = cl100k.vocab.pieces[int(in_word.argmax())]
    assert b"compute_weighted_checksum".startswith(b"compute_wei" + best)


def test_fused_scores_are_the_models_rows_weighted_and_summed(cl100k):
    """`Fusion.advance` adds the n-gram model's few scored tokens into the identifier model's row: the
    same float32 numbers, bit for bit, as weighting and summing the two models' whole rows, along the
    states of a path through names of the project and new words."""
    corpus = project(cl100k)
    corpus.update_document("main.py", MAIN)
    for weights in (FusionWeights(0.7, 0.4), FusionWeights(0.7, 0.0), FusionWeights(0.0, 0.4)):
        fusion = corpus.fusion("main.py", weights, cursor_line=3)
        context = tuple(cl100k.encode(MAIN[: -len("compute_wei")].encode()))
        _, (state,) = fusion.init_states(context, MAIN.encode(), [((), b"")])
        overlaps = 0  # tokens both models score
        for token in cl100k.encode(b" compute_weighted_checksum(values, weights)\n    result = zlib.crc32(x)"):
            (row,), next_states = fusion.advance([state])
            tokens, scored = fusion.ngram.scored(state[0])
            whole_ngram_row = np.zeros(len(row), dtype=np.float32)
            whole_ngram_row[tokens] = scored
            expected = np.multiply(whole_ngram_row, np.float32(weights.ngram))
            expected += fusion.identifiers.row(state[1]) * np.float32(weights.identifiers)
            assert np.array_equal(row, expected) and not np.signbit(row[row == 0]).any()
            overlaps += np.count_nonzero(fusion.identifiers.row(state[1])[tokens])
            state = next_states[0, token]
        assert overlaps > 10


def test_corpus_stats_count_what_was_added(cl100k):
    corpus = ProjectCorpus(cl100k)
    corpus.add_file("lib.py", LIB)
    corpus.add_file("lib.py", LIB)  # again: replaced, not counted twice
    corpus.commit()
    corpus.update_document("main.py", MAIN)
    stats = corpus.stats()
    assert stats["files"] == 1 and stats["documents"] == 1 and stats["bytes"] == len(LIB)
    assert stats["identifiers"] == len(names_in((LIB + MAIN).encode()).keys() | language_names().keys())
    assert stats["tokens"] == len(cl100k.encode(LIB.encode())) + len(cl100k.encode(MAIN.encode())) or stats["tokens"] > 0
    corpus.remove_file("lib.py")
    assert b"compute_weighted_checksum" not in corpus.names.counts


# --- fusion in generation (the real model) ------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2():
    from cpc.engine import Engine

    return Engine.load("smollm2", threads=1)


@pytest.mark.parametrize("mode", ["cpc", "naive", "heal"])
def test_fusion_with_zero_weights_changes_nothing(smollm2, mode):
    from cpc.generate import Options, generate

    corpus = ProjectCorpus(smollm2.tokenizer)
    corpus.add_file("lib.py", LIB)
    corpus.commit()
    corpus.update_document("main.py", MAIN)
    off = corpus.fusion("main.py", FusionWeights.off(), cursor_line=3)
    for prefix in (MAIN, "import os\nos.pa", "def f(x):\n    return x.app", "for i in ra"):
        options = Options(mode=mode, n=2, max_tokens=6)
        smollm2.clear()
        plain = generate(smollm2, prefix, options=options)
        smollm2.clear()
        fused = generate(smollm2, prefix, options=options, fusion=off)
        assert [(c.text, c.logprob, c.tokens) for c in fused.completions] == [
            (c.text, c.logprob, c.tokens) for c in plain.completions
        ]


def test_fusion_pulls_with_the_evidence_behind_it(cl100k):
    """A lone short file is little evidence: fusion keeps almost none of its weights there, and a project's
    file most of them; the weights a request's fusion uses are the pull times the ones asked for."""
    lone = ProjectCorpus(cl100k)
    lone.update_document("main.py", MAIN)
    in_project = project(cl100k)
    in_project.update_document("main.py", MAIN)
    assert lone.pull("main.py") == 0.0 and lone.fusion("main.py", FusionWeights(), cursor_line=3).is_off
    assert in_project.pull("main.py") == 1.0
    in_project.update_document("novel.py", " ".join(f"zq{k}" for k in range(40)))
    assert MIN_PULL < in_project.pull("novel.py") < 0.5, "a document of names the corpus never saw lowers it"
    fusion = in_project.fusion("main.py", FusionWeights(0.5, 2.0), cursor_line=3)
    pull = in_project.pull("main.py")
    assert fusion.weights == FusionWeights(0.5 * pull, 2.0 * pull)


def test_fusion_completes_a_name_from_another_file(smollm2):
    from cpc.generate import Options, generate

    corpus = project(smollm2.tokenizer)
    corpus.update_document("main.py", MAIN)
    smollm2.clear()
    fused = generate(smollm2, MAIN, options=Options(max_tokens=8), fusion=corpus.fusion("main.py", cursor_line=3))
    assert fused.completions[0].text.startswith("ghted_checksum")
