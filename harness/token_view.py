"""A model's tokens of a line of code, shown with a bar where the cursor cuts one (what `make demo` prints).

    >>> from cpc.tokenizer import TiktokenTokenizer
    >>> token_view(TiktokenTokenizer(), "    self.width = width", "    self.width = wid")
    '[   ][ self][.width][ =][ wid|th]'
"""

from __future__ import annotations

from cpc.tokenizer import Tokenizer


def token_view(tokenizer: Tokenizer, line: str, typed: str) -> str:
    """``tokenizer``'s tokens of the whole ``line``, each in brackets; the one the end of ``typed`` cuts split by a bar."""
    pieces, cut = [], len(typed.encode())
    offset = 0
    for token in tokenizer.encode(line.encode()):
        piece = tokenizer.vocab.pieces[token]
        if offset < cut < offset + len(piece):
            k = cut - offset
            pieces.append(f"[{piece[:k].decode(errors='replace')}|{piece[k:].decode(errors='replace')}]")
        else:
            pieces.append(f"[{piece.decode(errors='replace')}]")
        offset += len(piece)
    return "".join(pieces)
