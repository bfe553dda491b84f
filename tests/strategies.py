"""Hypothesis strategies: code-like text with CJK, emoji, combining marks."""

from hypothesis import strategies as st

_ATOMS = [
    "def", "self", "return", "userName", "intermediary", "apple", "x", "_", "__init__",
    " ", "  ", "    ", "\n", "\n\n", "\t", "\r\n",
    "(", ")", ":", ".", ",", "=", "==", "'", '"', "'s", "'ll", "#", "->", "[]",
    "0", "7", "123", "4567",
    "日本", "語", "こんにちは", "😀", "👍🏽", "é", "e\u0301", "Ж", "ß",
]

code_text = st.lists(
    st.one_of(st.sampled_from(_ATOMS), st.text(min_size=1, max_size=3)),
    min_size=1,
    max_size=8,
).map("".join)
"""Short texts built from code tokens, whitespace, digits and non-ASCII."""
