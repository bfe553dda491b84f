"""Where a completion ends, and how it meets the text after the cursor (`cpc.stops`): pure rules, no model."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.stops import StopRules, replaced_after
from tests.support.strategies import code_text, examples


def test_stop_rules():
    single = StopRules.around("x = f(a", ", c)\n", multiline=False)
    assert single.cut("bc") is None
    assert single.cut("bc\nmore") == "bc"
    assert single.cut("bc, c) + 1") == "bc"  # stops where the text after the cursor begins
    assert single.trim("bc, ") == "bc"  # the start of the text after the cursor is not repeated
    multi = StopRules.around("def f():\n    if x:\n        re", "", multiline=True)
    assert multi.indent == 8
    assert multi.cut("turn 1\n        y = 2\n") is None
    assert multi.cut("turn 1\n    else:\n") == "turn 1"
    assert multi.cut("turn 1\n\n\ndef g") == "turn 1"
    following = StopRules.around("def f():\n    x = ", "\n    return x\n", multiline=True)
    assert following.cut("1\n    return x") == "1"


def test_a_text_that_loops_ends_in_its_first_round():
    single = StopRules.around("assert(", "", multiline=False)
    assert single.cut("this[kUsed] && this[kUsed] && this[kUsed] && this[kUsed] && this[kU") == "this[kUsed]"
    assert single.cut("logprefix, false, false, false, false") == "logprefix, false"
    assert single.cut("ft.left.left.left.left.left") == "ft"  # no clean end in the round: its first word
    assert single.cut("this[kUsed] && this[kUsed] && this[kUsed] && this[k") is None  # three rounds: not yet
    for text in ("[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]", "# -+-+-+-+-+-+-+-+-+-+", "'=' * 40  # " + "=" * 40,
                 "# +-------+-------+-------+", "x" + " " * 40):
        assert single.cut(text) is None, text  # short periods, rules, blanks, three rounds of a table
    multi = StopRules.around("def f():\n    ", "", multiline=True)
    assert multi.cut("a = 1\n    b = 2\n    b = 2\n    b = 2\n    b = 2") == "a = 1\n    b = 2"


@pytest.mark.parametrize("prefix, suffix, model_line, shown, replaced", [
    ('print("Hello, ', '")', '" + name)', '" + name)', 2),  # takes in the quote and the bracket: replaces them
    ("def f(a", ")", ", b):", ", b):", 1),  # goes on past the bracket to the line's end
    ("x = g(", ")", ").strip()", ").strip()", 1),
    ("if len(s", ")", ") > 0:", ") > 0:", 1),
    ("d['ke", "']", "y'] = 1", "y'] = 1", 2),
    ("f(a", ")", "a, b", "a, b", 0),  # never reaches the bracket: inserted before it
    ('print("Hello, ', '")', 'world" + x', "world", 0),  # the quote without the bracket: cut before the quote
    ("f(a", ", c)", ", b, c) + 1", ", b", 0),  # not closers only: stops where the text after the cursor begins
    ("files = os.listd", "(path)", 'ir("data")', "ir", 0),  # never meets it: ends before its first symbol
    ("config = {'", "': True,", "user': 'root',", "user", 0),
    ("f(", ", c)", "g(a, b), d)", "g(a, b)", 0),  # the symbol outside the brackets the text opens
    ("x = ", "foo(1)", "bar(2)", "", 0),  # the cursor touches a word: a text that never meets it is none
    ("x = ", "foo(1)", "self.foo(1)", "self.", 0),  # what the text writes before it meets the word
    ("    pr", "nt(x)", "int(x)", "i", 0),  # a letter missing inside a word
    ("    pri", "nt(x)", "nt(os.sep)", "", 0),  # the word is whole: nothing to add
    ("if aw", "fetch(url):", "ait fetch(url):", "ait ", 0),  # the blank before the word is kept
    ("x = ", "foo(1)", "bar(foo(1))", "", 0),  # the bracket it opens before the word is never closed
    ("if no", " && node.isRoot", "de && node.then", "de", 0),  # blanks and more after the cursor: meets them
    ("    nam", " = sys.stdin", "e = io.open(fd)", "e", 0),
    ("clas", " PoolStats {", "s Node {", "s", 0),  # never meets them: the word at the cursor, finished
    ("x(i + SGR", " + 1))) {", "_MAX_LEN)) && g(i + ", "_MAX_LEN", 0),  # meets them past brackets it never opened
    ("x = f", "  # note", "(a)", "(a)", 0),  # starts no word: as before
])
def test_a_completion_takes_in_the_closers_after_the_cursor(prefix, suffix, model_line, shown, replaced):
    """An editor's auto-closed pairs leave closers after the cursor while a line is typed; a completion that
    holds them in their order replaces them, and the line once accepted is the model's line. Before other text
    after the cursor a completion ends where it meets it, or before its first symbol."""
    rules = StopRules.around(prefix, suffix + "\n", multiline=False)
    text = rules.cut(model_line + "\n")
    assert (text, replaced_after(text, suffix + "\n")) == (shown, replaced)


CLOSER_TEXT = st.text(alphabet=")]}\"'`:;,{ ", min_size=1, max_size=6)


@settings(max_examples=examples(200), deadline=None)
@given(model_line=code_text, suffix=CLOSER_TEXT)
def test_an_accepted_completion_never_repeats_the_closers_after_it(model_line, suffix):
    """Property: the line once accepted holds the closers after the cursor once: either the completion takes
    them in and replaces them, or it ends before their first character."""
    rules = StopRules.around("x = f(", suffix + "\nnext", multiline=False)
    text = rules.cut(model_line.replace("\r", "") + "\n")
    replaced = replaced_after(text, suffix + "\nnext")
    closers = suffix.rstrip()
    assert "\n" not in text
    if replaced:
        assert replaced == len(closers) and rules.closers == closers
    elif rules.closers:
        assert closers[0] not in text  # ends before the closers' first character: nothing of them repeated


@settings(max_examples=examples(200), deadline=None)
@given(model_line=code_text, word=st.from_regex(r"[a-z_][a-z0-9_]{0,4}", fullmatch=True), rest=code_text,
       typed=st.sampled_from(["x = ", "    pr", "f(a, ", "if no"]))
def test_a_completion_before_a_word_after_the_cursor_ends_where_it_meets_it(model_line, word, rest, typed):
    """Property: where the cursor touches a word after it, the completion is nothing, or what the model's line
    writes before it meets that word (as the end of one of its words, with the brackets it opened closed): once
    accepted, the line holds the word as the model wrote it, and never a word of the model glued to it."""
    suffix = word + rest.replace("\r", "").partition("\n")[0]
    line = model_line.replace("\r", "").partition("\n")[0]
    rules = StopRules.around(typed, suffix + "\nnext", multiline=False)
    text = rules.cut(line + "\n")
    assert rules.word_after == re.match(r"[\w$]+", suffix).group()
    if text:
        met = line[len(text) :]
        assert line.startswith(text) and met.startswith(rules.word_after)
        assert not re.match(r"[\w$]", met[len(rules.word_after) :])
        assert text.count("(") == text.count(")")


@settings(max_examples=examples(200), deadline=None)
@given(model_line=code_text, blanks=st.sampled_from([" ", "  ", "\t"]), rest=code_text,
       typed=st.sampled_from(["x = ", "    pr", "f(a, ", "if no"]))
def test_a_completion_before_blanks_and_more_ends_where_it_meets_them_or_with_its_word(model_line, blanks, rest, typed):
    """Property: where blanks and more follow the cursor, a completion that goes on the word at the cursor is that
    word finished, or what the model's line writes before it meets those blanks and what comes first after them:
    nothing of the model's is left glued before the rest of the line."""
    after = rest.replace("\r", "").partition("\n")[0].strip()
    line = model_line.replace("\r", "").partition("\n")[0]
    if not after or not re.match(r"[\w$]", line):
        return
    rules = StopRules.around(typed, blanks + after + "\nnext", multiline=False)
    text = rules.cut(line + "\n")
    word = re.match(r"[\w$]+", line).group()
    met = line[len(text) :].lstrip(" \t")
    assert line.startswith(text)
    assert text == word or (line[len(text) :].startswith(rules.piece_after.lstrip(" \t")) or
                            met.startswith(rules.piece_after.lstrip(" \t"))), (text, line, rules.piece_after)


@settings(max_examples=examples(200), deadline=None)
@given(model_line=code_text, symbol=st.sampled_from("(.,=+'\"[:"), rest=code_text)
def test_a_completion_that_never_meets_the_text_after_the_cursor_ends_before_its_symbol(model_line, symbol, rest):
    """Property: before text that starts with a symbol (and is not closers only), a completion that does not end
    where that text begins holds no such symbol outside the brackets it opens."""
    suffix = symbol + rest.replace("\r", "").partition("\n")[0]
    line = model_line.replace("\r", "").partition("\n")[0]
    rules = StopRules.around("x = f", suffix + "\nnext", multiline=False)
    text = rules.cut(line + "\n")
    if rules.closers or suffix.strip() in line:
        return
    depth = 0
    for char in text:
        assert not (char == symbol and depth <= 0), (text, suffix)
        depth += (char in "([{") - (char in ")]}")
