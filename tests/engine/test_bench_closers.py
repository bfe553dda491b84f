"""`harness.bench.closers`: lines being typed in an editor that closes brackets and quotes, and the cursors drawn in them."""

from pathlib import Path

import pytest

from harness.bench.closers import auto_closed, draw_closers_cases

SOURCE = '''import os


def load(path, mode="r"):
    with open(os.path.join(path, "store.json"), mode) as file:
        return {"text": file.read(), "size": len(file.read())}


# a comment (with brackets) is typed with no pairs modelled
LABELS = ["it's", f"{os.sep}", 'x']
'''


@pytest.mark.parametrize("typed, closers", [
    ('print("Hello, ', '")'),
    ("x = f(a, [1, 2", "])"),
    ("if d['ke", "']"),  # a quote after a bracket is closed
    ("it's a", ""),  # an apostrophe after a word is not
    ('s = "(', '"'),  # a bracket inside a string waits before a quote: not closed
    ("print(f(x))", ""),  # each closer typed over the one waiting
    ("x = f'{a", "'"),  # after a string prefix a quote opens a string
    ("`${a", "`"),
])
def test_the_closers_an_editor_holds_while_a_line_is_typed(typed, closers):
    assert auto_closed(typed) == closers


def test_a_case_is_a_line_typed_up_to_the_cursor_with_the_closers_after_it(tmp_path: Path):
    (tmp_path / "store.py").write_text(SOURCE)
    files = [tmp_path / "store.py"]

    class Engine:  # the token kind of a cursor needs the model's tokenizer
        from cpc.tokenizer import TiktokenTokenizer
        tokenizer = TiktokenTokenizer()
        vocab = tokenizer.vocab

    cases = draw_closers_cases(Engine, files, 12, seed=1)
    assert draw_closers_cases(Engine, files, 12, seed=1) == cases, "the same seed draws the same cases"
    lines = SOURCE.split("\n")
    for case in cases:
        typed = case.prefix.rpartition("\n")[2]
        line = next(line for line in lines if line.startswith(typed) and line[len(typed):] == case.line_rest)
        assert SOURCE.startswith(case.prefix) and case.line_rest, "the file up to the cursor, and the rest of its line"
        assert case.suffix and case.suffix == auto_closed(typed), "the editor's closers follow the cursor"
        assert not line.lstrip().startswith("#"), "no cursor in a comment"
        assert case.document == case.prefix[: case.prefix.rfind("\n") + 1], "fusion reads the lines before the cursor"
    assert {case.suffix for case in cases} >= {")", "}", '"]'}
