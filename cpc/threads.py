"""The model's thread count under contention: one fewer than every core while another process holds one.

llama.cpp splits each decode across its threads and waits at a barrier
after every operation of the graph. When another process holds one of the
cores (a build, a test run), the thread scheduled on it arrives late at
every barrier, and each one-token decode takes several times as long: on
the 2-core test machine, a suggestion's p50 went from 288 ms to 758 ms with
two threads and to 406 ms with one. The load comes and goes, so
`ThreadTuner` watches the one-token steps (a token and its logits; `cpc.llama`
times no other decode: a token read without logits costs 0.4 of a step):
with every core it keeps the
fastest time seen as the idle figure, and when the recent decodes run well
above it, it moves to one thread fewer; from there it times a decode with
every core now and then, and moves back once that runs near the idle
figure again.

A decode's numbers depend on its thread count (llama.cpp splits some sums
by thread), so on an idle machine the tuner never changes the count: the
texts are those of every core, as before.

    >>> tuner = ThreadTuner(cores=2, explore_every=4)
    >>> for _ in range(12):
    ...     tuner.record(tuner.next(), 10.0)  # idle
    >>> tuner.current, tuner.explored
    (2, 0)
    >>> for _ in range(12):
    ...     threads = tuner.next()
    ...     tuner.record(threads, 30.0 if threads == 2 else 18.0)  # a core taken: two threads wait for it
    >>> tuner.current
    1
    >>> for _ in range(12):
    ...     tuner.record(tuner.next(), 10.0)  # the core is free again: a check with every core finds it out
    >>> tuner.current
    2
"""

from __future__ import annotations

__all__ = ["ThreadTuner"]

EXPLORE_EVERY = 24
"""With one thread fewer, one decode in this many runs with every core, to see whether the load is gone."""

SMOOTHING = 0.3
"""Weight of the newest time in the moving average of recent decodes."""

SLOW = 1.5
"""Recent decodes this many times the idle figure mean another process holds a core."""

RECOVERED = 1.25
"""A decode with every core within this factor of the idle figure means the load is gone."""


class ThreadTuner:
    """Every core while decodes run at their idle speed, one fewer while they do not."""

    def __init__(self, cores: int, explore_every: int = EXPLORE_EVERY) -> None:
        self.cores = cores
        self.current = cores
        self.explore_every = explore_every
        self.explored = 0
        """Decodes run with every core to check whether the load was gone."""
        self._idle: float | None = None
        """The fastest one-token decode with every core (it drifts up slowly: contexts grow)."""
        self._recent: float | None = None
        self._count = 0

    def next(self) -> int:
        """The thread count for the next one-token decode."""
        self._count += 1
        if self.current < self.cores and self._count % self.explore_every == 0:
            self.explored += 1
            return self.cores
        return self.current

    def record(self, threads: int, milliseconds: float) -> None:
        """A one-token decode's time with ``threads``."""
        if threads != self.cores:
            return
        idle = self._idle
        if self.current < self.cores:  # a check with every core: is the load gone?
            if idle is not None and milliseconds <= RECOVERED * idle:
                self.current, self._recent = self.cores, None
            return
        self._idle = milliseconds if idle is None else min(idle * 1.002, milliseconds)
        recent = self._recent
        self._recent = milliseconds if recent is None else (1 - SMOOTHING) * recent + SMOOTHING * milliseconds
        if self.cores > 1 and self._recent > SLOW * self._idle:
            self.current = self.cores - 1
