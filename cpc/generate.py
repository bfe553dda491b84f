"""Completions of the text around the cursor: three ways to start, one way to go on.

The modes differ only in the state generation starts from, so they can be
compared on the same requests:

- ``naive``: tokenize the text before the cursor and continue it. When the
  cursor sits inside a token, the model continues from a tokenization it
  rarely saw in training.
- ``heal``: one-token token healing (what HF transformers ships): drop the
  last token and make the first generated token start with its bytes.
- ``cpc``: character prefix conditioning. `cpc.conditioning` weighs every
  tokenization that covers exactly the typed characters; the best covering
  paths, each extended by its best next tokens, compete in one batched
  model call, and generation goes on from the winners (`cpc.start`). A
  path's token may already reach past the cursor (its *overhang*): that is
  the start of the completion.

Then every mode continues greedily, the ``n`` alternatives batched together,
streamed through `cpc.detok` and cut by the stop rules (`cpc.stops`): the end of the line
(single-line), a line indented less than the cursor's line (multi-line), a
token or time budget, and the text after the cursor (a completion never
repeats what follows it). Models with fill-in-the-middle tokens get a FIM
prompt: the stable prefix in the FIM prefix, the suffix after FIM-suffix,
and the unstable tail conditioned right after FIM-middle.

With a `cpc.fusion.Fusion`, every choice — the first token among the
covering paths and each continuation — is made on ``log P_LM + λ·score``
of the corpus's fusion models, in every mode; with every λ at 0 the
completions are exactly those without fusion.

    >>> from cpc.engine import Engine
    >>> engine = Engine.load("smollm2")
    >>> generation = generate(engine, "import numpy as np\\nx = np.zer", options=Options(max_tokens=4))
    >>> generation.completions[0].text.startswith("os")
    True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cpc.conditioning import stable_tokens
from cpc.detok import Detokenizer
from cpc.draft import Draft, DraftParameters, Lookup, kept
from cpc.lm import Cancelled, State, best_allowed, greedy_choice, log_softmax
from cpc.runs import FollowedRun
from cpc.stops import FIRST_WORD, StopRules, whole_words
from cpc.start import FirstToken, Fused, Start, contenders, first_tokens, rank_starts
from cpc.window import MAX_SUFFIX_TOKENS, fit_window, prompt_window

if TYPE_CHECKING:
    from cpc.engine import Engine
    from cpc.fusion import Fusion, FusionState

__all__ = ["MODES", "Cancelled", "Completion", "Generation", "Options", "generate", "prompt_frame", "warm"]

MODES = ("naive", "heal", "cpc")

FUSION_PATHS = 16
"""With fusion, the covering paths ranked again on model + fusion score before the best
``lookahead_paths`` compete: a path whose token spells on into a corpus name (``" frob"``
for a typed ``fr``) is rarely among the model's first four. Ranking needs no model call."""


@dataclass(frozen=True)
class Options:
    """How to complete: the mode, how many alternatives, and when to stop."""

    mode: str = "cpc"
    n: int = 1
    """Distinct completions wanted (fewer come back when the model offers fewer)."""
    max_tokens: int = 48
    multiline: bool = False
    time_budget_ms: float | None = None
    """Generation stops after this long (the conditioning before it is not counted). None: only
    ``max_tokens`` and the stop rules end it, so what comes out does not depend on the machine's speed."""
    word_budget_ms: float | None = None
    """After this long (from the request's start), `generate`'s ``early`` hears the suggestions so far,
    each cut after its first word, and generation goes on to the stop rules: a keystroke mid-word gets
    the word it types quickly, and the whole line follows. None: no early answer."""
    fim: bool = True
    """Use a fill-in-the-middle prompt when the model has FIM tokens and there is a suffix."""
    max_suffix_tokens: int = MAX_SUFFIX_TOKENS
    lookahead_paths: int = 4
    """``cpc``: how many of the best covering paths compete for the first generated token."""
    prompt_budget_ms: float | None = None
    """Cut the prompt window (`cpc.window.fit_window`) so that reading what the KV cache lacks
    of it takes about this long: a cold request is answered from the text just before the cursor
    (llama.vim's ``t_max_prompt_ms``), and `warm` reads the whole window for the next one. None: no cut."""
    lookahead_margin: float = 4.0
    """``cpc``: of those, only the paths at most this many nats behind the best are evaluated. One
    further behind wins only where the best path's likeliest next token has a probability under
    ``e**-margin`` (2 % for 4 nats); each path evaluated costs the model's output layer once more."""
    drafts: DraftParameters = DraftParameters()
    """Speculative drafts from the text itself (`cpc.draft`), for a model that checks them cheaply:
    fewer model calls for the texts decoding without them gives (near-ties aside: docs/benchmarks.md)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}: choose one of {', '.join(MODES)}")
        if self.n < 1 or self.max_tokens < 1:
            raise ValueError("n and max_tokens must be at least 1")


@dataclass(frozen=True)
class Completion:
    """One suggestion: the text that goes after the cursor."""

    text: str
    logprob: float
    """``log P(tokens | prompt)`` minus, for ``cpc``, ``log P(typed tail | prompt)``; with fusion, plus ``λ·score``."""
    typed: bytes
    """The typed bytes that ``tokens`` re-read before the completion (``cpc`` tail, healed token)."""
    tokens: State
    """The model's tokens after the prompt: they decode to ``typed``, the completion, and
    whatever the stop rules cut off."""


@dataclass(frozen=True)
class Generation:
    completions: list[Completion]
    mode: str
    elapsed_ms: float
    lm_calls: int
    prompt_tokens: int
    drafted: int = 0
    """Draft tokens checked (`cpc.draft`)."""
    accepted: int = 0
    """Of those, the tokens greedy decoding chose too."""
    run_tokens: int = 0
    """Tokens the model decoded on its own side in greedy runs (`cpc.runs`), the unused ones included."""
    cut_short: bool = False
    """The prompt window was cut for ``prompt_budget_ms``: `warm` it for the next request."""


@dataclass
class _Stream:
    """One alternative being generated."""

    tokens: State
    prompt_length: int
    typed: bytes
    logprob: float
    detok: Detokenizer
    text: str = ""
    done: bool = False
    generated: int = 0
    fusion_state: FusionState | None = None
    first: bool = False
    """The stream the byte-level marginal chose: it comes first, whatever its score."""
    lookup: Lookup | None = None
    """Where its drafts come from (None: no drafts)."""
    match: int = 0
    """How long a match proposed the draft being checked (`cpc.draft.Draft.match`)."""
    plain_next: bool = False
    """A draft's check left its next choice to a plain step (too close a call for a batched row)."""


def generate(
    engine: Engine,
    document: str,
    cursor: int | None = None,
    options: Options = Options(),
    cancelled: Callable[[], bool] | None = None,
    fusion: Fusion | None = None,
    wanted: Callable[[str], bool] | None = None,
    early: Callable[[list[str]], None] | None = None,
) -> Generation:
    """Complete ``document`` at ``cursor`` (a character offset; None: the document's end).

    The engine reads its window around the cursor (`cpc.engine.Engine.window`):
    every caller, the editor's server as the command line and the
    benchmarks, reads the same text for the same cursor.
    ``cancelled`` is polled before each model evaluation (and between the
    batches of a long prompt); when it returns True the work stops with
    `cpc.lm.Cancelled`, and every cache stays usable. ``fusion`` adds the
    corpus's fusion scores to every choice (one whose weights are 0 is left
    out: `cpc.fusion.Fusion.is_off`). ``wanted`` is asked about
    each completion's text so far before each generation step: when it says
    no to all of them, the work stops with `cpc.lm.Cancelled` too (the user
    has typed on, and not what these texts start with). ``early`` is called
    once, past `Options.word_budget_ms`, with the texts so far cut after
    their first word, best first (a first answer to show); generation then
    goes on, and the final texts usually extend them (not always: a stop
    rule may trim a text's end).
    """
    if fusion is not None and fusion.is_off:
        fusion = None
    window = engine.window(document, cursor)
    with engine.lm.interruptible(cancelled):
        return _generate(engine, window.prefix, window.suffix, options, fusion, wanted, early)


def _generate(engine: Engine, prefix: str, suffix: str, options: Options, fusion: Fusion | None,
              wanted: Callable[[str], bool] | None, early: Callable[[list[str]], None] | None) -> Generation:
    started = time.perf_counter()
    word_deadline = None if options.word_budget_ms is None or early is None else started + options.word_budget_ms / 1000
    stats = engine.lm.stats
    calls, drafted, accepted, run_tokens = stats.calls, stats.drafted, stats.accepted, stats.run_tokens
    head, middle = prompt_frame(engine, suffix, options)
    prompt, starts, cut_short = _starts(engine, prefix, head, middle, options, fusion is not None)
    fused = Fused(fusion, prompt[: len(prompt) - len(middle)], prefix.encode("utf-8")) if fusion else None
    starts, scores = rank_starts(starts, max(options.lookahead_paths, options.n), fused)
    starts = contenders(starts, scores, options.lookahead_margin, options.n)
    marginal = options.mode == "cpc"
    firsts = first_tokens(starts, engine.beam.snapshots, engine.index, n=options.n, by_marginal=marginal, fused=fused)
    streams = _streams(engine, firsts, len(prompt), marginal)
    rules = StopRules.around(prefix, suffix, multiline=options.multiline)
    for stream in streams:
        if stream.done:
            _finish(stream, rules, fusion)
        else:
            _settle(stream, rules, fusion)
    _continue(engine, streams, rules, options, fusion, wanted, _EarlyAnswer(word_deadline, early, options.n, rules))
    completions = _distinct(streams, options.n, rules)
    return Generation(
        completions=completions,
        mode=options.mode,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        lm_calls=stats.calls - calls,
        prompt_tokens=len(prompt),
        cut_short=cut_short,
        drafted=stats.drafted - drafted,
        accepted=stats.accepted - accepted,
        run_tokens=stats.run_tokens - run_tokens,
    )


def warm(engine: Engine, document: str, cursor: int | None = None, options: Options = Options(),
         cancelled: Callable[[], bool] | None = None) -> int:
    """Read the whole prompt window of a request at ``cursor`` of ``document`` into the KV cache, ahead of it.

    What a request would read before the text it conditions on: the FIM
    frame and the stable part's tokens, without a time budget. For ``cpc``,
    also the next-token row there, the byte beam's root (kept in
    `cpc.beam.SnapshotCache`): a keystroke in the word at the cursor
    starts from it, one model step sooner (about 10 ms on 2 cores; the
    request reads the same state, so its text is the same). Stops with
    `cpc.lm.Cancelled` when ``cancelled`` turns True (what was read keeps).
    Returns the tokens read without logits (for cpc all but the last, which its row reads; 0: all cached).
    """
    window = engine.window(document, cursor)
    head, middle = prompt_frame(engine, window.suffix, options)
    tokens, _ = stable_tokens(engine.tokenizer, window.prefix, engine.prompt_tokens)
    root = head + tokens + middle
    cpc = options.mode == "cpc"
    with engine.lm.interruptible(cancelled):
        read = engine.lm.prefill(root[:-1] if cpc else root)  # the row's evaluation reads the last token
        if cpc:
            engine.beam.snapshots.get(root)
        return read


def prompt_frame(engine: Engine, suffix: str, options: Options = Options()) -> tuple[State, State]:
    """What the model reads before and after the prefix's tokens: ``(head, middle)``.

    Plain prompts are ``BOS + prefix``; with FIM tokens and a suffix,
    ``[BOS] FIM-prefix + prefix + FIM-suffix suffix FIM-middle``, and the
    completion (for ``cpc``, the re-read tail first) follows FIM-middle.
    """
    fim = engine.gguf.fim_tokens() if options.fim and suffix else None
    if fim is None:
        return engine.lm.bos, ()
    fim_prefix, fim_suffix, fim_middle = fim
    suffix_tokens = engine.tokenizer.encode(suffix.encode("utf-8"))[: options.max_suffix_tokens]
    bos = engine.lm.bos if engine.lm.bos[0] not in engine.vocab.eos_ids else ()
    return (*bos, fim_prefix), (fim_suffix, *suffix_tokens, fim_middle)


def _starts(
    engine: Engine, prefix: str, head: State, middle: State, options: Options, fusion: bool = False
) -> tuple[State, list[Start], bool]:
    """The prompt the mode shares, the states generation may start from, and whether the window was cut.

    With fusion, ``cpc`` offers `FUSION_PATHS` covering paths, for fusion to pick the best of.
    """
    budget = options.prompt_budget_ms
    if options.mode == "cpc":
        conditioning = engine.conditioner.condition(
            prefix, head=head, middle=middle, budget_ms=budget, prompt_tokens=engine.prompt_tokens
        )
        best = conditioning.paths[: max(options.lookahead_paths, options.n, FUSION_PATHS if fusion else 0)]
        prompt = conditioning.prompt
        return prompt, [
            Start(
                path.tokens, path.logprob - conditioning.logprob, conditioning.tail, path.overhang,
                path=path.tokens[len(prompt) :],
            )
            for path in best
        ], conditioning.cut_short
    full = prompt_window(engine.tokenizer.encode(prefix.encode("utf-8")), engine.prompt_tokens)
    tokens = fit_window(engine.lm, head, full, middle, budget)
    if options.mode == "heal" and tokens:
        prompt = head + tokens[:-1] + middle
        healed = engine.vocab.pieces[tokens[-1]]
        return prompt, [Start(prompt, 0.0, healed, allowed=engine.index.range_starting_with(healed))], len(tokens) < len(full)
    prompt = head + tokens + middle
    return prompt, [Start(prompt, 0.0)], len(tokens) < len(full)


def _streams(engine: Engine, firsts: list[FirstToken], prompt_length: int, marginal_first: bool) -> list[_Stream]:
    """A stream per chosen (start, first token) pair; with ``marginal_first``, the first is the marginal's choice."""
    pieces = engine.vocab.pieces
    streams = []
    for first in firsts:
        start, token = first.start, first.token
        detok = Detokenizer(engine.vocab, context=start.typed)
        stream = _Stream(start.tokens, prompt_length, start.typed, first.logprob, detok, detok.push_bytes(start.shown))
        stream.fusion_state = first.fusion_state
        stream.first = marginal_first and not streams
        if token is None:
            stream.done = True
        else:
            # A healed token starts with the typed bytes it replaces.
            piece = pieces[token][len(start.typed) :] if start.allowed else pieces[token]
            stream.tokens += (token,)
            stream.generated = 1
            stream.text += detok.push_bytes(piece)
        streams.append(stream)
    return streams


def _continue(
    engine: Engine, streams: list[_Stream], rules: StopRules, options: Options, fusion: Fusion | None = None,
    wanted: Callable[[str], bool] | None = None, early: _EarlyAnswer | None = None,
) -> None:
    """Greedy decoding of every unfinished stream, one batched model call per step (on fused scores with fusion).

    A step takes one token per stream, or, where the text offers a draft (`cpc.draft`), the draft's
    tokens that greedy decoding chooses too and the token after them. A lone stream on a model that
    decodes on its own side follows a greedy run there (`cpc.runs`): a token per step still, each the
    choice a step here makes, from one request. ``early`` hears the first words once its deadline has
    passed (`Options.word_budget_ms`). Past the time budget, every stream ends at its last whole word.
    Raises `cpc.lm.Cancelled` before a step when ``wanted`` wants no stream's text.
    """
    banned = engine.vocab.special.copy()
    eos_ids = sorted(engine.vocab.eos_ids)
    banned[eos_ids] = False
    is_eos = np.zeros(len(banned), dtype=bool)
    is_eos[eos_ids] = True
    deadline = math.inf if options.time_budget_ms is None else time.perf_counter() + options.time_budget_ms / 1000
    room = engine.lm.n_ctx - 1
    if engine.lm.checks_drafts_cheaply and options.drafts.max_tokens:
        for stream in streams:
            stream.lookup = Lookup(options.drafts)
    run: FollowedRun | None = None
    try:
        while True:
            live = [s for s in streams if not s.done]
            if not live:
                return
            if wanted is not None and not any(wanted(s.text) for s in streams):
                raise Cancelled("no completion is wanted any more")
            now = time.perf_counter()
            if now > deadline:
                for stream in live:
                    stream.text = whole_words(stream.text)
                    _finish(stream, rules, fusion)
                return
            if early is not None:
                early.offer(streams, now)
            run = _follow(engine, run, live, options, room, fusion is not None)
            steps = _step(engine, live, run, options, room, banned, fusion)
            for stream, step in zip(live, steps):
                _take(stream, step, is_eos, rules, options, room, fusion)
    finally:
        if run is not None:
            run.close()


def _follow(engine: Engine, run: FollowedRun | None, live: list[_Stream], options: Options, room: int,
            fused: bool) -> FollowedRun | None:
    """The greedy run a lone stream follows: the one under way, or a new one from the stream's state where the
    model decodes on its own side; None where steps are taken here."""
    if run is not None and run.open:
        return run
    if len(live) != 1 or not engine.lm.runs_greedily:
        return None
    stream = live[0]
    length = min(options.max_tokens - stream.generated, room - len(stream.tokens))
    return FollowedRun(engine.lm, stream.tokens, length, fused=fused, stop_at_line_end=not options.multiline)


def _step(engine: Engine, live: list[_Stream], run: FollowedRun | None, options: Options, room: int,
          banned: np.ndarray, fusion: Fusion | None) -> list[list[_Pick]]:
    """Each live stream's tokens for this step: the run's next one, a checked draft's, or a plain step's."""
    if run is not None:
        pick = run.next_pick(banned, fusion, live[0].fusion_state)
        if pick is not None:
            return [[pick]]
        # the run cannot decide here, or it ended: a plain step decides, and the next step starts a new run
    drafts = [_draft(stream, options, room, engine) for stream in live]
    if any(drafts):
        steps = _choose_along(engine, live, drafts, banned, fusion, options.drafts.clear_margin)
        for stream, draft, step in zip(live, drafts, steps):
            engine.drafts.record(stream.match, len(draft), kept(draft, [token for token, _, _ in step]))
        return steps
    return _choose(engine, live, banned, fusion)


def _take(stream: _Stream, step: list[_Pick], is_eos: np.ndarray, rules: StopRules, options: Options, room: int,
          fusion: Fusion | None) -> None:
    """Add a step's tokens to a stream, until one ends it."""
    for token, logprob, fusion_state in step:
        if stream.done:
            return
        stream.logprob += logprob
        if is_eos[token]:
            _finish(stream, rules, fusion)
            return
        stream.fusion_state = fusion_state
        stream.tokens += (token,)
        stream.generated += 1
        stream.text += stream.detok.push(token)
        if stream.generated >= options.max_tokens or len(stream.tokens) >= room:
            _finish(stream, rules, fusion)
        else:
            _settle(stream, rules, fusion)


_Pick = tuple[int, float, "FusionState | None"]
"""A token chosen for a stream, its score, and the fusion state it leads to (None without fusion)."""


def _choose(engine: Engine, live: list[_Stream], banned: np.ndarray, fusion: Fusion | None) -> list[list[_Pick]]:
    """Each live stream's next token (never a control token but EOS) and its score, from one batched model call.

    Unfused, the model answers only that (`LanguageModel.greedy_next`); fused, the choice is on the
    sum of the model's log-probabilities and the corpus scores, so every token's row is needed.
    """
    states = [s.tokens for s in live]
    if fusion is None:
        chosen, logprobs = engine.lm.greedy_next(states, banned)
        return [[(token, logprob, None)] for token, logprob in zip(chosen.tolist(), logprobs.tolist())]
    scores, next_states = fusion.advance([s.fusion_state for s in live])
    chosen, fused = best_allowed(np.add(engine.lm.next_logprobs(states), scores, out=scores), banned)
    return [[(token, logprob, next_states[number, token])]
            for number, (token, logprob) in enumerate(zip(chosen.tolist(), fused.tolist()))]


def _choose_along(engine: Engine, live: list[_Stream], drafts: list[State], banned: np.ndarray,
                  fusion: Fusion | None, margin: float) -> list[list[_Pick]]:
    """`_choose`, made along each stream's draft in one model call: at every position, the token greedy
    decoding would choose there (the same arithmetic as `_choose`), as long as it is the draft's.

    llama.cpp's numbers move a little with the batch they are computed in, so a row of a draft's
    check decides only where its choice leads the runner-up by ``margin`` nats; a closer call is left
    to a plain step, as decoding without drafts would make it.
    """
    picks: list[list[_Pick]] = [[] for _ in live]
    scratch = np.empty(len(banned), dtype=np.float32)

    def choose(number: int, position: int, scores: np.ndarray) -> int | None:
        stream_picks = picks[number]
        if fusion is None:
            token, logprob = greedy_choice(scores, banned, scratch)
            next_state = None
            lead = _lead(scores, token, banned)
        else:
            state = stream_picks[-1][2] if stream_picks else live[number].fusion_state
            row = np.empty(len(scores), dtype=np.float32)
            log_softmax(row, scores)
            fused, next_states = fusion.advance([state])
            row = row + fused[0]
            chosen, value = best_allowed(row[None], banned)
            token, logprob, next_state = int(chosen[0]), float(value[0]), next_states[0, int(chosen[0])]
            lead = _lead(row, token, banned)
        if lead < margin:
            live[number].plain_next = True
            return None
        stream_picks.append((token, logprob, next_state))
        return token

    engine.lm.check_drafts([s.tokens for s in live], drafts, choose)
    return picks


def _lead(scores: np.ndarray, token: int, banned: np.ndarray) -> float:
    """How far ``token``'s score is ahead of the best other allowed token's (``scores`` is left as it was)."""
    best = scores[token]
    scores[token] = -np.inf
    try:
        runner_up = int(scores.argmax())
        if banned[runner_up]:
            runner_up = int(np.where(banned, -np.inf, scores).argmax())
        return float(best - scores[runner_up])
    finally:
        scores[token] = best


def _draft(stream: _Stream, options: Options, room: int, engine: Engine) -> State:
    """The tokens a stream's text suggests come next (`cpc.draft.Lookup`), cut where the stream would end
    anyway (its token budget, the context's end, and single-line, after the line's end), then to the
    length worth checking on this machine (`cpc.draft.DraftPolicy`)."""
    if stream.lookup is None or stream.plain_next:
        stream.plain_next = False
        return ()
    limit = min(options.max_tokens - stream.generated, room - len(stream.tokens)) - 1
    tokens, stream.match = stream.lookup.propose(stream.tokens, limit)
    if not options.multiline:
        pieces = engine.vocab.pieces
        tokens = next((tokens[:length] for length, token in enumerate(tokens, 1) if b"\n" in pieces[token]), tokens)
    if options.drafts.cost_aware:
        tokens = tokens[: engine.drafts.length(Draft(tokens, stream.match), engine.lm.check_cost)]
    return tokens


@dataclass
class _EarlyAnswer:
    """A first answer, given once past a deadline: each unfinished text cut after its first whole word."""

    deadline: float | None
    """None: no early answer is wanted."""
    listener: Callable[[list[str]], None] | None
    n: int
    rules: StopRules
    given: bool = False

    def offer(self, streams: list[_Stream], now: float) -> None:
        """Give the answer now if the deadline has passed and every unfinished text holds a whole first word."""
        if self.given or self.deadline is None or now <= self.deadline:
            return
        texts = []
        for stream in sorted(streams, key=lambda s: (s.first, s.logprob), reverse=True):
            if stream.done:
                texts.append(stream.text)
                continue
            word = FIRST_WORD.match(stream.text)
            if word is None or word.end() == len(stream.text):
                return  # a text whose first word may still grow: a later step answers
            texts.append(self.rules.trim(word.group()))
        self.given = True
        shown = list(dict.fromkeys(text for text in texts if text))[: self.n]
        if shown:
            self.listener(shown)


def _settle(stream: _Stream, rules: StopRules, fusion: Fusion | None = None) -> None:
    """Apply the stop rules to the text so far.

    Bytes that are not UTF-8 end the completion: an editor gets whole
    characters, never U+FFFD.
    """
    broken = stream.text.find("\ufffd")
    if broken >= 0:
        stream.text = stream.text[:broken]
        _finish(stream, rules, fusion)
        return
    final = rules.cut(stream.text)
    if final is not None:
        stream.text = final
        _end(stream, fusion)


def _finish(stream: _Stream, rules: StopRules, fusion: Fusion | None = None) -> None:
    """End the stream: an unfinished last character is dropped, the stop rules cut and trim."""
    final = rules.cut(stream.text)
    stream.text = final if final is not None else rules.trim(stream.text)
    _end(stream, fusion)


def _end(stream: _Stream, fusion: Fusion | None) -> None:
    """Mark the stream done; fusion settles its end-of-text score (a name left unfinished gives its bonus back)."""
    if fusion is not None and stream.fusion_state is not None and not stream.done:
        stream.logprob += float(fusion.final([stream.fusion_state])[0])
    stream.done = True


def _distinct(streams: list[_Stream], n: int, rules: StopRules) -> list[Completion]:
    """Non-empty completions, best first, each text once."""
    seen: set[str] = set()
    completions = []
    for stream in sorted(streams, key=lambda s: (s.first, s.logprob), reverse=True):
        if not stream.text or stream.text in seen:
            continue
        seen.add(stream.text)
        completions.append(
            Completion(
                text=stream.text,
                logprob=stream.logprob,
                typed=stream.typed,
                tokens=stream.tokens[stream.prompt_length :],
            )
        )
    return completions[:n]

