"""`harness.bench.appended`: a word's end inside a line, with the run of characters that followed it left out."""

from pathlib import Path

from harness.bench.appended import draw_appended_cases

SOURCE = '''import os


def load(path, mode="r"):
    with open(os.path.join(path, "store.json"), mode) as file:
        return {"size": len(file.read()), "name": path}  # the whole file
    # a comment line (with brackets) is never drawn
'''


def test_a_case_is_a_word_end_with_the_run_after_it_left_out(tmp_path: Path):
    (tmp_path / "store.py").write_text(SOURCE)
    files = [tmp_path / "store.py"]

    class Engine:  # the token kind of a cursor needs the model's tokenizer
        from cpc.tokenizer import TiktokenTokenizer
        tokenizer = TiktokenTokenizer()
        vocab = tokenizer.vocab

    cases = draw_appended_cases(Engine, files, 10, seed=1)
    assert draw_appended_cases(Engine, files, 10, seed=1) == cases, "the same seed draws the same cases"
    lines = SOURCE.split("\n")
    for case in cases:
        typed = case.prefix.rpartition("\n")[2]
        assert typed + case.line_rest in lines and SOURCE.startswith(case.prefix), "the file up to the cursor"
        assert typed[-1].isalnum() or typed[-1] == "_", "the cursor at a word's end"
        missing = case.line_rest[: len(case.line_rest) - len(case.suffix)]
        assert case.line_rest.endswith(case.suffix) and missing and not missing[0].isalnum() and " " not in missing
        assert case.suffix[0] == " " and case.suffix.strip(), "blanks, then more of the line, after the cursor"
        assert not typed.lstrip().startswith("#")
    assert {case.line_rest[: len(case.line_rest) - len(case.suffix)] for case in cases} >= {"(path,", "(os.path.join(path,"}
