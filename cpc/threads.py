"""The model's thread count under contention: the count whose decodes are measured fastest now.

llama.cpp splits each decode across its threads and waits at a barrier
after every operation of the graph. When another process holds one of the
cores (a build, a test run), the thread scheduled on it arrives late at
every barrier, and each one-token decode takes several times as long: on
the 2-core test machine, a suggestion's p50 went from 288 ms to 758 ms with
two threads and to 406 ms with one. The best count depends on the load,
which comes and goes, so `ThreadTuner` measures instead of guessing: it
keeps a moving average of the decode time for each candidate count (every
core, and one fewer), uses the faster, and now and then times the other
again, so it follows the machine's load both ways.

    >>> tuner = ThreadTuner(cores=2, explore_every=4)
    >>> for _ in range(12):
    ...     threads = tuner.next()
    ...     tuner.record(threads, 10.0 if threads == 2 else 16.0)  # idle: two threads are faster
    >>> tuner.current
    2
    >>> for _ in range(12):
    ...     threads = tuner.next()
    ...     tuner.record(threads, 30.0 if threads == 2 else 18.0)  # a core taken: one thread is faster
    >>> tuner.current
    1
"""

from __future__ import annotations

__all__ = ["ThreadTuner"]

EXPLORE_EVERY = 24
"""One decode in this many runs with the other count, to see whether the load has changed: on an idle
2-core machine a one-thread decode costs about 1.5x, so the exploration costs about 2 %."""

SMOOTHING = 0.3
"""Weight of the newest time in each count's moving average."""


class ThreadTuner:
    """Chooses between every core and one fewer from the decode times it is told."""

    def __init__(self, cores: int, explore_every: int = EXPLORE_EVERY) -> None:
        self.candidates = [cores, cores - 1] if cores > 1 else [cores]
        self.current = cores
        self.explore_every = explore_every
        self._average: dict[int, float] = {}
        self._count = 0

    def next(self) -> int:
        """The thread count for the next measured decode."""
        self._count += 1
        others = [count for count in self.candidates if count != self.current]
        if others and (self._count % self.explore_every == 0 or others[0] not in self._average and self._count > 2):
            return others[0]
        return self.current

    def record(self, threads: int, milliseconds: float) -> None:
        """A decode's time with ``threads``; the faster count on average becomes the current one."""
        known = self._average.get(threads)
        self._average[threads] = milliseconds if known is None else (1 - SMOOTHING) * known + SMOOTHING * milliseconds
        if len(self._average) == len(self.candidates):
            self.current = min(self._average, key=self._average.__getitem__)
