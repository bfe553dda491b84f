"""The identifier model: the corpus's names, as a fusion model that rewards spelling them.

A soft version of monitor-guided decoding (Agrawal et al. 2023). The names
defined or used anywhere in the corpus are kept sorted, so the names
that start with a given byte string are one contiguous run (a trie laid out
flat, like `cpc.index`). While the model spells an identifier, each byte
that keeps it on the way to a known name earns a bonus of 1; a token that
leaves every known name — or ends the word on something that is not a
name — gives back everything the word earned (TurboBias's refund), so a
name that is started and not finished nets exactly zero. Tokens that do not
touch an identifier score 0 (NeMo's neutral non-advancing tokens).

The monitor's part: a word that leaves every known name (or ends on
something that is not one) also pays `PENALTY`, once, at the token that
shows it, and so does a token that starts a word no known name starts. A
refund alone only takes back a bonus; without the penalty an invented name
(``requiose``, ``outputStream``) costs nothing, and the undefined-name rate on
the cross-file benchmark did not move. A word the user is typing that leads
to no known name is theirs: it pays nothing. One that leads to a project's
name earned nothing for its typed bytes, but they are at stake (up to
`STAKE_CAP`): a token that leaves every name gives them back with the
penalty. The more of a name the user has typed, the surer it is that they
are typing it: after ``zanzibar_qu``, whose one name in the project is
``zanzibar_quokka_tally``, the model's ``quotes`` paid only the penalty,
against the bonus of a rare ``ok``, and won.

The penalty is for uses. Where a word starts (`cpc.syntax.Place.role`)
decides how it is judged: a use, as above; the first word of a statement
(``result = []``, or ``print(...)``) when it ends: it pays the penalty
unless an assignment follows it (``=``, ``+=``, ``:``, ``:=``, ``,``), since
then it is a new name; a definition (``def xor(i, j)``, ``for idx, elem in``,
``as f``, ``int count``, ``func (s *Server) Get(ctx``...) never pays: its
word is new. It still earns on the way to a known name, as a statement's
first word does: the function that other files of the project call, defined
here, or the project's own name for a parameter (``ctx``, ``buf``). Prose
(comments and strings) is not judged at all: its words are not names. The
known names include the language's own (`language_names`: keywords,
builtins, the members of builtin types), which a file uses without defining
them.

The bonus is per byte, so a greedy step prefers the token that spells more
of a known name (``checksum`` over ``c``: the model's ``c`` leads to
``compute_weighted_c_values``) instead of the one the model likes best now
and cannot finish later. But a token earns for no more bytes than the
shortest rest of a name the word may still become (or `MIN_CAP`), so a long
name does not beat a short one for its length (uncapped, ``lo|okup`` beat
``lo|ad`` and ``options`` beat ``opts`` on the cross-file benchmark; capped at
the shortest rest alone, ``St|ripBOM`` earned 1 byte per token, because
``Str`` is a name too). The first token of a word earns nothing, like the
typed bytes of the word at the cursor: a bonus for starting names would
reward starting another word over ending the line. A word one token starts
and ends inside it (``x(``) is not judged at all.

Token shapes are precomputed once per vocabulary: how many identifier bytes
a token starts with, and whether it ends the word (``ghted(`` spells
``ghted``, then ends it).

    >>> names = NameCounts(TokenShapes([b"comp", b"ute", b" comp", b"(", b"x"]))
    >>> names.add(Counter({b"compute": 1}))
    >>> model = IdentifierModel(names)
    >>> state = model.start(b"x = comp")[1]
    >>> [float(score) for score in model.row(state)]  # "ute" spells "compute"; the others leave it: the 4 typed, and 1
    [-5.0, 3.0, -5.0, -5.0, -5.0]
    >>> state = model.next_state(state, 1)  # "compute", three earned
    >>> [float(score) for score in model.row(state)]  # going on past the name gives them back and pays; "(" keeps them
    [-8.0, -8.0, 0.0, 0.0, -8.0]
"""

from __future__ import annotations

import builtins
import keyword
import re
import threading
import weakref
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from cpc.syntax import ASSIGNMENT, C_LIKE, PROSE, DEFINE, USE, Place, Syntax
from cpc.vocab import TokenGroups, Vocabulary

BONUS = 1.0
"""What one byte on the way to a known name earns (the fusion weight scales it)."""

MIN_CAP = 2
"""A token earns for at least this many bytes, however short the shortest name it may become."""

PENALTY = 1.0
"""What a word pays for leaving every known name (in bonus units: the fusion weight scales it)."""
STAKE_CAP = 16
"""Of the bytes typed of a project's name, at most this many are at stake (`IdentifierModel.start`)."""



NAME = re.compile(rb"[A-Za-z_$\x80-\xff]*[A-Za-z$\x80-\xff][A-Za-z0-9_$\x80-\xff]*")
"""Identifiers in Python, JavaScript and most C-like languages; bytes >= 0x80 are letters of non-ASCII names.

A run of underscores alone (a ``# ______`` rule in a comment) is no name: as one, it led the decoder
to spell ``___________________________`` after a typed ``__``."""

_WORD_CHARACTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$" + bytes(range(0x80, 0x100))
"""The bytes of identifiers, as `bytes.strip` takes them (a scan in C, not a loop over bytes)."""


_JAVASCRIPT_NAMES = """
break case catch class const continue debugger default delete do else export extends false finally for function if
import in instanceof new null return super switch this throw true try typeof var void while with yield let static
enum await async of get set from as undefined NaN Infinity arguments globalThis Object Function Array String Number
Boolean Symbol BigInt Math JSON Date RegExp Error TypeError RangeError SyntaxError ReferenceError EvalError URIError
AggregateError Promise Proxy Reflect Map Set WeakMap WeakSet WeakRef ArrayBuffer DataView Int8Array Uint8Array
Int16Array Uint16Array Int32Array Uint32Array Float32Array Float64Array Intl console process Buffer require module
exports __dirname __filename setTimeout clearTimeout setInterval clearInterval setImmediate clearImmediate
queueMicrotask structuredClone parseInt parseFloat isNaN isFinite encodeURIComponent decodeURIComponent encodeURI
decodeURI URL URLSearchParams TextEncoder TextDecoder AbortController fetch window document navigator length
prototype constructor name message stack cause toString valueOf hasOwnProperty toLocaleString keys values entries
assign create defineProperty getPrototypeOf setPrototypeOf getOwnPropertyNames freeze fromEntries is push pop shift
unshift slice splice concat join reverse sort indexOf lastIndexOf includes find findIndex filter map forEach reduce
some every flat flatMap fill at from isArray charAt charCodeAt codePointAt startsWith endsWith padStart padEnd repeat
replace replaceAll split substring substr toLowerCase toUpperCase trim trimStart trimEnd match matchAll search
localeCompare normalize fromCharCode test exec lastIndex source flags then resolve reject all allSettled any race has
add clear size apply call bind parse stringify abs ceil floor round max min pow sqrt random sign trunc log exp now
getTime toISOString toJSON error warn info debug trace env argv exit cwd nextTick on once emit off removeListener
addListener pipe write end read close readFile readFileSync writeFile writeFileSync existsSync mkdirSync
readdirSync statSync dirname basename extname relative isAbsolute sep toFixed isInteger iterator done value next
"""


@cache
def language_names() -> Counter[bytes]:
    """Names a file uses without defining them: Python's keywords, builtins and the members of its builtin types
    (as this interpreter lists them), and JavaScript's keywords, globals and the common members of its builtin
    objects. Every corpus knows them (`cpc.fusion.ProjectCorpus`).

    >>> names = language_names()
    >>> all(name in names for name in (b"enumerate", b"append", b"startswith", b"forEach", b"console"))
    True
    """
    found = set(keyword.kwlist + keyword.softkwlist) | set(dir(builtins)) | set(_JAVASCRIPT_NAMES.split())
    for value in vars(builtins).values():
        if isinstance(value, type):
            found.update(dir(value))
    return Counter({name.encode(): 1 for name in found if NAME.fullmatch(name.encode())})


def names_in(text: bytes) -> Counter[bytes]:
    """Every identifier occurrence in ``text``.

    >>> sorted(names_in(b"def f(x): return x.y1").items())
    [(b'def', 1), (b'f', 1), (b'return', 1), (b'x', 2), (b'y1', 1)]
    """
    return Counter(NAME.findall(text))


def trailing_word(data: bytes) -> bytes:
    """The identifier bytes at the end of ``data`` (the word being typed).

    >>> trailing_word(b"x = self.comp"), trailing_word(b"f(")
    (b'comp', b'')
    """
    return data[len(data.rstrip(_WORD_CHARACTERS)):]


def _lead(piece: bytes) -> int:
    """How many identifier bytes ``piece`` starts with."""
    return len(piece) - len(piece.lstrip(_WORD_CHARACTERS))


class TokenShapes:
    """Per token of a vocabulary: leading identifier bytes, whether it ends a word, the word it leaves open."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        size = len(pieces)
        self.pieces = pieces
        self.lead = np.fromiter(map(_lead, pieces), dtype=np.int32, count=size)
        self.length = np.fromiter(map(len, pieces), dtype=np.float32, count=size)
        self.breaks = self.lead < self.length
        self.assigns = ~self.breaks & (self.length > 0)
        """Tokens whose bytes after the word they end begin an assignment to it (`` =``, ``+=``, ``:``, ``,``),
        or are blank: a statement's first word ended by one may be a new name."""
        breaking = np.flatnonzero(self.breaks).tolist()
        for token in breaking:
            self.assigns[token] = ASSIGNMENT.match(pieces[token], int(self.lead[token])) is not None
        trails = {token: trail for token in breaking if (trail := trailing_word(pieces[token]))}
        # The masks a row is built with are float32 ones and zeros: a product (``row += mask * x``) over 262,144
        # tokens is about 15 times as fast as a masked write (``where=mask``), which branches on every token.
        self.opens_word = np.zeros(size, dtype=np.float32)
        """1 for tokens that open a word after a break (`` self``, ``(self``), else 0."""
        self.opens_word[list(trails)] = 1.0
        self.stems, self.words = TokenGroups.of_two_kinds(
            ((pieces[token], token) for token in np.flatnonzero(~self.breaks & (self.length > 0)).tolist()),
            ((trail, token) for token, trail in trails.items()),
        )
        """``stems``: tokens by the word their last identifier bytes are part of: a whole-word token's bytes, or
        the word a token starts after a break (``(self`` and `` self`` under ``self``). ``words``: the tokens made
        only of identifier bytes, by their bytes."""
        self.finishers = TokenGroups.of((pieces[token][:lead], token) for token in breaking if (lead := self.lead[token]))
        """Tokens that end a word after identifier bytes, by those bytes (``ghted(`` under ``ghted``)."""
        ends_first = self.breaks & (self.lead == 0)
        self.ends_first = ends_first.astype(np.float32)
        """1 for tokens whose first byte ends the word (``(``, ``" ."``, ``"\\n"``), else 0."""
        self.goes_on = (~ends_first).astype(np.float32)
        """1 for the others: tokens whose first byte does not end the word."""
        self.judged_outside = self.opens_word + (~self.breaks & (self.length > 0))
        """1 for the tokens whose word is judged from outside a word: whole-word tokens, and those that open one."""
        self.ends_unassigned = (self.breaks & ~self.assigns).astype(np.float32)
        """1 for tokens that end a word with no assignment to it after it."""

    def __len__(self) -> int:
        return len(self.pieces)

    @classmethod
    def of(cls, vocab: Vocabulary) -> TokenShapes:
        """The shapes of ``vocab``'s tokens, computed once per vocabulary (a second for 262k tokens)."""
        with _SHAPES_LOCK:
            shapes = _SHAPES.get(id(vocab))
            if shapes is None or shapes[0] is not vocab:
                shapes = _SHAPES[id(vocab)] = (vocab, cls(vocab.pieces))
                weakref.finalize(vocab, _SHAPES.pop, id(vocab), None)
        return shapes[1]


_SHAPES: dict[int, tuple[Vocabulary, TokenShapes]] = {}
_SHAPES_LOCK = threading.Lock()


class NameCounts:
    """How often each name occurs in the corpus, the names in byte order, and the tokens that lead to one."""

    def __init__(self, shapes: TokenShapes, base: Counter[bytes] | None = None) -> None:
        """``base``: names every corpus knows (`language_names`), counted once each."""
        self.shapes = shapes
        self.base = frozenset(base or ())
        self.counts: Counter[bytes] = Counter()
        self._sorted: list[bytes] = []
        self._unsorted: set[bytes] = set()
        """New names not yet in ``_sorted``: a project's files add hundreds of thousands, sorted once."""
        self.support: Counter[bytes] = Counter()
        """Per stem of the vocabulary (`TokenShapes.stems`), how many names start with it."""
        self.leads = np.zeros(len(shapes), dtype=bool)
        """Per token: the word its last identifier bytes open (or are) leads to a name. Kept up to date
        name by name, so a request does not look 200,000 stems up in the names."""
        self.lock = threading.Lock()
        self.add(Counter(dict.fromkeys(self.base, 1)))

    def add(self, names: Counter[bytes]) -> None:
        with self.lock:
            for name, count in names.items():
                if count <= 0:
                    continue
                if not self.counts[name]:
                    self._unsorted.add(name)
                    self._support(name, +1)
                self.counts[name] += count

    def remove(self, names: Counter[bytes]) -> None:
        with self.lock:
            for name, count in names.items():
                left = self.counts.get(name, 0) - count
                if count <= 0 or name not in self.counts:
                    continue
                if left > 0:
                    self.counts[name] = left
                    continue
                del self.counts[name]
                self._support(name, -1)
                if name in self._unsorted:
                    self._unsorted.discard(name)
                else:
                    del self._sorted[bisect_left(self._sorted, name)]

    def stems_of(self, name: bytes) -> Iterable[bytes]:
        """The vocabulary's stems that ``name`` starts with."""
        return self.shapes.stems.prefixes_of(name)

    def _support(self, name: bytes, change: int) -> None:
        for stem in self.stems_of(name):
            self.support[stem] += change
            if self.support[stem] == (1 if change > 0 else 0):
                self.leads[self.shapes.stems[stem]] = change > 0
            if not self.support[stem]:
                del self.support[stem]

    @property
    def sorted(self) -> list[bytes]:
        """Every name, in byte order (call with ``lock`` held)."""
        self.sort()
        return self._sorted

    def sort(self) -> None:
        """Put the names added since the last sort in order (call with ``lock`` held)."""
        if len(self._unsorted) > 64:
            self._sorted = sorted(self.counts)
        else:
            for name in self._unsorted:
                self._sorted.insert(bisect_left(self._sorted, name), name)
        self._unsorted.clear()

    def __len__(self) -> int:
        return len(self.counts)


@dataclass(frozen=True)
class _Prefix:
    """What a word-so-far allows next: tokens that extend it toward a name, tokens that finish one."""

    extend: np.ndarray
    """Tokens that spell on toward a name of the project (they earn)."""
    finish: np.ndarray
    """Tokens that end the word on a name of the project (they earn)."""
    keep: np.ndarray
    """Tokens that spell on toward a language name only (`IdentifierModel.borrowed`): no bonus, no penalty."""
    close: np.ndarray
    """Tokens that end the word on a language name only: it gives back what it earned, and pays nothing."""
    is_name: bool
    """The word is a name of the project."""
    is_known: bool
    """The word is a name, the project's or the language's."""
    cap: int
    """The most bytes one token earns for: the shortest rest of a project's name that starts with the word."""


State = tuple[bytes | None, float, str, Place]
"""(identifier bytes so far, or None when they lead to no known name or are not judged; bonus earned by them so
far; how the word is judged: `USE`, `START`, `DEFINE`, `DUE` or nothing; where the text is)."""

DUE = "due"
"""A statement's first word that left every name: the penalty is due when it ends, unless an assignment follows."""


class IdentifierModel:
    """The fusion model over a snapshot of the names (``left_out``: occurrences that do not count)."""

    def __init__(self, names: NameCounts, left_out: Counter[bytes] | None = None, penalty: float = PENALTY,
                 syntax: Syntax = C_LIKE) -> None:
        shapes = names.shapes
        self.shapes = shapes
        self.penalty = penalty
        self.syntax = syntax
        """How the document writes comments and strings (`cpc.syntax.Syntax.of` its name)."""
        with names.lock:
            self.sorted = list(names.sorted)
            self.excluded = {name for name, count in (left_out or {}).items() if names.counts.get(name, 0) <= count}
            self.borrowed = frozenset(name for name in names.base if names.counts.get(name, 0) <= 1)
            """The language's names the corpus does not use: known, but they earn no bonus."""
            leads = names.leads.copy()
            lost = Counter(stem for name in self.excluded for stem in names.stems_of(name))
            for stem, count in lost.items():
                if names.support[stem] <= count:
                    leads[shapes.stems[stem]] = False
        dead = np.where(leads, np.float32(0.0), np.float32(-penalty))
        zero = np.float32(0.0)  # added to a product, it makes the -0.0 of ``-penalty * 0`` the 0.0 np.where gave
        self._opening = dead * shapes.opens_word + zero
        """Scores of the words tokens open after a break: nothing, or the penalty for one that leads nowhere."""
        self._fresh = dead * shapes.judged_outside + zero
        """Scores from outside a word: whole-word tokens are judged too."""
        self._free = np.zeros(len(shapes), dtype=np.float32)
        """Scores of the words tokens open where no penalty is due (they may be new names, or prose)."""
        self._unless_assigned = shapes.ends_unassigned * np.float32(-penalty) + zero
        """What a statement's first word pays when a token ends it on no name: nothing where an assignment follows."""
        for fixed in (self._opening, self._fresh, self._free):
            fixed.setflags(write=False)  # `row` hands them out as they are
        self._prefixes: dict[bytes, _Prefix] = {}

    def start(self, text: bytes, overhang: bytes = b"") -> tuple[float, State]:
        """The state after ``text`` (typed bytes earn nothing; on the way to a project's name they are at stake),
        then the score of ``overhang`` bytes beyond them."""
        word = trailing_word(text)
        before = Place.of(text[: len(text) - len(word)], self.syntax)
        _, state = self._opened(word, before.role(), before.after(word))
        if state[0] is None:  # the user's own word, leading to no name: it pays nothing, now or later
            state = (None, 0.0, "", state[3])
        elif word and state[2] == USE and self._leads_to_name(word, own=True):
            # the typed bytes on the way to a project's name are at stake: leaving the names costs them
            state = (state[0], float(_earned(len(word), STAKE_CAP)), state[2], state[3])
        if not overhang:
            return 0.0, state
        return self._step(state, overhang, None)

    def row(self, state: State) -> np.ndarray:
        """Every token's score from ``state``: bonus on the way to a name, refund when leaving it.

        A word a token opens is judged as a word that starts where ``state`` is (`Place.role`).
        Outside a word the row is one of the model's own, read-only: most steps of a line make no copy.
        """
        word, earned, judged, place = state
        opening = self._opening if place.role() == USE else self._free
        if word is None:  # in a word that leads to no name, or is not judged: only the words tokens open count
            return opening + self._unless_assigned if judged == DUE else opening
        if not word:
            return self._fresh if place.role() == USE else self._free
        if judged == USE:
            leaving = np.float32(-earned - self.penalty)
        elif judged == DEFINE:  # a new name: leaving the known ones gives back what it earned, no more
            leaving = np.float32(-earned)
        else:  # a statement's first word: the penalty only where a token ends it with no assignment after it
            leaving = self._unless_assigned - np.float32(earned)
        prefix = self._prefix(word)
        if prefix.is_known:  # a finished name keeps its bonus where the next token's first byte ends the word
            row = opening.copy()
            row += self.shapes.goes_on * leaving
            if not prefix.is_name:  # a language name: the bonus earned toward the project's names goes back
                row -= self.shapes.ends_first * np.float32(earned)
        else:
            row = opening + leaving
        row[prefix.keep] = 0.0
        row[prefix.close] = opening[prefix.close] - np.float32(earned)
        row[prefix.extend] = _earned(self.shapes.length[prefix.extend], prefix.cap)
        row[prefix.finish] = _earned(self.shapes.lead[prefix.finish], prefix.cap) + opening[prefix.finish]
        return row

    def next_state(self, state: State, token: int) -> State:
        return self._step(state, self.shapes.pieces[token], token)[1]

    def final(self, states: Sequence[State]) -> np.ndarray:
        """A word left unfinished at the end gives its bonus back."""
        return np.array([
            -earned if word is not None and earned and not self._prefix(word).is_name else 0.0
            for word, earned, _, _ in states
        ])  # a statement's first word still due at the end pays nothing: it may be a new name, as a typed word

    def _step(self, state: State, piece: bytes, token: int | None) -> tuple[float, State]:
        word, earned, judged, place = state
        after = place.after(piece)
        lead = int(self.shapes.lead[token]) if token is not None else _lead(piece)
        if lead == len(piece):
            if word is None:
                return 0.0, (None, 0.0, judged, after)
            if not word:
                return self._opened(piece, place.role(), after)
            longer = word + piece
            if self._leads_to_name(longer):
                gain = float(_earned(len(piece), self._prefix(word).cap)) if self._leads_to_name(longer, own=True) else 0.0
                return gain, (longer, earned + gain, judged, after)
            if judged == USE:
                return -earned - self.penalty, (None, 0.0, "", after)
            return -earned, (None, 0.0, "" if judged == DEFINE else DUE, after)
        score = 0.0
        unless_assigned = 0.0 if ASSIGNMENT.match(piece, lead) else self.penalty
        if word:  # a word this token starts and ends earned nothing, and gives nothing back
            finished = word + piece[:lead]
            if self._is_name(finished) and finished not in self.borrowed:
                score += float(_earned(lead, self._prefix(word).cap))
            elif self._is_name(finished):
                score -= earned
            else:
                score -= earned + (self.penalty if judged == USE else 0.0 if judged == DEFINE else unless_assigned)
        elif word is None and judged == DUE:
            score -= unless_assigned
        trail = trailing_word(piece)
        if not trail:
            return score, (b"", 0.0, "", after)
        opened, state = self._opened(trail, place.role(), after)  # judged as `row` judges it: where the token starts
        return score + opened, state

    def _opened(self, word: bytes, role: str, place: Place) -> tuple[float, State]:
        """A word started in ``role``. A use is free when it leads to a name and pays the penalty when it leads
        nowhere; a statement's first word that leads nowhere owes it (`DUE`); a definition that leads nowhere is
        the user's new name, free; prose is not judged."""
        if role == PROSE:
            return 0.0, (None, 0.0, "", place)
        if self._leads_to_name(word):
            return 0.0, (word, 0.0, role, place)
        if role == USE:
            return -self.penalty, (None, 0.0, "", place)
        return 0.0, (None, 0.0, "" if role == DEFINE else DUE, place)

    def _names_starting(self, prefix: bytes) -> Iterable[bytes]:
        names = self.sorted
        position = bisect_left(names, prefix)
        while position < len(names) and names[position].startswith(prefix):
            if names[position] not in self.excluded:
                yield names[position]
            position += 1

    def _leads_to_name(self, word: bytes, own: bool = False) -> bool:
        """Whether some name starts with ``word`` (``own``: some name of the project, not `borrowed`)."""
        names = self._names_starting(word)
        return not word or next((name for name in names if not own or name not in self.borrowed), None) is not None

    def _is_name(self, word: bytes) -> bool:
        position = bisect_left(self.sorted, word)
        return position < len(self.sorted) and self.sorted[position] == word and word not in self.excluded

    def _prefix(self, word: bytes) -> _Prefix:
        prefix = self._prefixes.get(word)
        if prefix is None:
            prefix = self._prefixes[word] = self._build_prefix(word)
        return prefix

    def _build_prefix(self, word: bytes) -> _Prefix:
        shapes = self.shapes
        parts: dict[bool, set[bytes]] = {True: set(), False: set()}  # by whether the name is the project's own
        rests: dict[bool, set[bytes]] = {True: set(), False: set()}
        for name in self._names_starting(word):
            rest, own = name[len(word) :], name not in self.borrowed
            rests[own].add(rest)
            parts[own].update(rest[:length] for length in range(1, len(rest) + 1))
        return _Prefix(
            _union(shapes.words, parts[True]),
            _union(shapes.finishers, rests[True]),
            _union(shapes.words, parts[False] - parts[True]),
            _union(shapes.finishers, rests[False] - rests[True]),
            self._is_name(word) and word not in self.borrowed,
            self._is_name(word),
            max(MIN_CAP, min((len(rest) for rest in rests[True] if rest), default=1)),
        )


def _union(groups: TokenGroups, keys: Iterable[bytes]) -> np.ndarray:
    found = [groups[key] for key in keys if key in groups]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _earned(spelled, cap: int):
    """The bonus for spelling ``spelled`` bytes of a name in one token (a number or an array)."""
    return BONUS * np.minimum(spelled, cap)
