"""Hypothesis strategies (code-like text with CJK, emoji, combining marks) and example budgets.

Every property test sizes its run with `examples`: the count it names under
`make test`, that count times ``CPC_FUZZ`` under `make fuzz`.
"""

import os

from hypothesis import strategies as st

FUZZ_SCALE = max(1, int(os.environ.get("CPC_FUZZ") or 1))
"""How many times more examples each property test tries (``make fuzz`` sets ``CPC_FUZZ``)."""


def examples(count: int) -> int:
    """The example budget of a property test that tries ``count`` examples in `make test`."""
    return count * FUZZ_SCALE


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
