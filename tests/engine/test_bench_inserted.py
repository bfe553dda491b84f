"""`harness.bench.inserted`: a line typed anew between two lines of a file, with the rest of the file after it."""

from pathlib import Path

from harness.bench.inserted import draw_inserted_cases, repeats_a_neighbour

SOURCE = '''import os


def load(path, mode="r"):
    with open(os.path.join(path, "store.json"), mode) as file:
        size = len(file.read())
        size = len(file.read())
        return {"size": size, "name": path}
    # a comment line is never drawn
'''


class Engine:  # the token kind of a cursor needs the model's tokenizer
    from cpc.tokenizer import TiktokenTokenizer
    tokenizer = TiktokenTokenizer()
    vocab = tokenizer.vocab


def test_a_case_is_a_line_typed_anew_with_the_rest_of_the_file_after_it(tmp_path: Path):
    (tmp_path / "store.py").write_text(SOURCE)
    cases = draw_inserted_cases(Engine, [tmp_path / "store.py"], 12, seed=1)
    assert draw_inserted_cases(Engine, [tmp_path / "store.py"], 12, seed=1) == cases, "the same seed draws the same"
    lines = SOURCE.split("\n")
    for case in cases:
        typed = case.prefix.rpartition("\n")[2]
        line = typed + case.line_rest
        assert line in lines and case.prefix + case.line_rest + case.suffix == SOURCE, "the file, the line typed anew"
        assert case.suffix.startswith("\n"), "the cursor's line holds nothing after the cursor"
        word = typed.lstrip()
        assert line.lstrip().startswith(word) and len(word) < max(1, len(line.split("(")[0].split()[0])), (
            "from none to all but one of the line's first word's characters are typed")
        assert not line.lstrip().startswith("#") and line.strip() != "size = len(file.read())", (
            "no comment line, and no line the same as the one after or before it")
        assert not repeats_a_neighbour(line, case.prefix, case.suffix)
    assert {case.prefix.rpartition("\n")[2].lstrip() for case in cases} >= {""}, "a line just opened is among them"


def test_a_neighbour_repeated_is_the_line_above_or_the_next_non_blank_line_below():
    prefix, suffix = "a = 1\n    b = 2\n    ", "\n\n    c = 3\n"
    assert repeats_a_neighbour("    b = 2", prefix, suffix) and repeats_a_neighbour("c = 3", prefix, suffix)
    assert not repeats_a_neighbour("a = 1", prefix, suffix) and not repeats_a_neighbour("   ", prefix, suffix)
