"""The model's thread count under contention: fewer threads than cores while other processes hold them.

llama.cpp splits each decode across its threads and waits at a barrier
after every operation of the graph. When another process holds one of the
cores (a build, a test run), the thread scheduled on it arrives late at
every barrier, and each decode takes several times as long: on the 2-core
test machine, a suggestion's p50 went from 288 ms to 758 ms with two
threads and to 406 ms with one. Beside another llama.cpp process with two
threads (a model test), each of the two spinning at its barriers while the
other's threads held the cores, a one-token step took 2.1 s instead of
27 ms with one thread. The load comes and goes, so `ThreadTuner` watches
the decodes (`cpc.llama` hands it each decode's wall time and its thread's
CPU time) for two signs of it:

- **the decoding thread waited**: its CPU time falls short of the wall
  time, because the scheduler gave its core to another process, or it slept
  at a barrier for a thread that had none. On an idle machine the thread
  computes or spins the whole decode (it waited 0-6 % of it here); beside
  a busy core 40 %, beside another model 50 %. This sign needs no figure
  from an idle machine, so it holds when the load was there from the start
  (a step of 2.1 s had passed for the idle speed), and it shows in a
  prompt's first chunk;
- **one-token steps run slow**: recent steps (a token and its logits; a
  token read without them costs 0.4 of a step) well above the fastest step
  seen with every core while the thread did not wait.

Then it takes one thread fewer, and another while the thread still waits.
From there it runs a step with every core now and then, and goes back to
every core once one runs near the idle figure without waiting.

A decode's numbers depend on its thread count (llama.cpp splits some sums
by thread), so on an idle machine the tuner never changes the count: the
texts are those of every core, as before.

    >>> tuner = ThreadTuner(cores=2, explore_every=4)
    >>> for _ in range(12):
    ...     tuner.record(tuner.next(), 10.0, 10.0)  # idle: the thread computed all the time
    >>> tuner.current, tuner.explored
    (2, 0)
    >>> for _ in range(12):
    ...     threads = tuner.next()
    ...     tuner.record(threads, 30.0 if threads == 2 else 18.0, 18.0)  # a core taken: two threads wait for it
    >>> tuner.current
    1
    >>> for _ in range(12):
    ...     tuner.record(tuner.next(), 10.0, 10.0)  # the core is free again: a check with every core finds it out
    >>> tuner.current
    2
    >>> loaded = ThreadTuner(cores=2)
    >>> loaded.record(2, 900.0, 450.0, step=False)  # loaded from the start: a prompt's chunk, half of it waited
    >>> loaded.current
    1
    >>> build = ThreadTuner(cores=4)
    >>> for _ in range(2):  # a build holds the cores: one thread fewer, and one more while the thread still waits
    ...     build.record(build.current, 40.0, 20.0)
    >>> build.current
    2
"""

from __future__ import annotations

__all__ = ["ThreadTuner"]

EXPLORE_EVERY = 24
"""With fewer threads, one step in this many runs with every core, to see whether the load is gone. Each check
that finds it still there doubles the wait for the next, up to `EXPLORE_LONGEST`: beside another model's
threads a step with every core can take two seconds."""

EXPLORE_LONGEST = 16 * EXPLORE_EVERY

SMOOTHING = 0.3
"""Weight of the newest decode in the moving averages of recent decodes."""

SLOW = 1.5
"""Recent steps with every core this many times the idle figure mean another process holds a core."""

RECOVERED = 1.25
"""A step with every core within this factor of the idle figure (and not waiting) means the load is gone."""

WAITED = 0.25
"""Recent decodes whose thread waited this share of their time mean other processes hold the cores: one thread
fewer."""

NOT_WAITED = 0.1
"""A decode whose thread waited at most this share of its time had its cores: an idle machine's figure."""


class ThreadTuner:
    """Every core while decodes run as on an idle machine, fewer while they do not."""

    def __init__(self, cores: int, explore_every: int = EXPLORE_EVERY, device: bool = False) -> None:
        """``device``: the model's layers are on a GPU, where the decoding thread also waits for the device, so
        a wait is no sign of load (only slow steps are)."""
        self.cores = cores
        self.device = device
        self.current = cores
        self.explore_every = explore_every
        self.explored = 0
        """Steps run with every core to check whether the load was gone."""
        self._idle: float | None = None
        """The fastest one-token step with every core whose thread did not wait (it drifts up slowly: contexts
        grow)."""
        self._recent: float | None = None
        """Recent steps' milliseconds with every core, smoothed."""
        self._waited: float | None = None
        """The share of their time that recent decodes' thread waited, with the current count, smoothed."""
        self._check_every = explore_every
        self._until_check = explore_every

    def next(self) -> int:
        """The thread count for the next one-token step."""
        if self.current < self.cores:
            self._until_check -= 1
            if self._until_check <= 0:
                self.explored += 1
                self._until_check = self._check_every = min(2 * self._check_every, EXPLORE_LONGEST)
                return self.cores
        return self.current

    def record(self, threads: int, milliseconds: float, cpu_milliseconds: float, step: bool = True) -> None:
        """A decode's wall time and its thread's CPU time with ``threads``; ``step``: one token and its logits
        (only steps are compared with the idle figure)."""
        if milliseconds <= 0:
            return
        waited = 0.0 if self.device else max(0.0, 1 - cpu_milliseconds / milliseconds)
        idle = self._idle
        if threads != self.current:  # a check with every core: is the load gone?
            if threads == self.cores and step and waited <= NOT_WAITED and (
                    idle is None or milliseconds <= RECOVERED * idle):
                self.current, self._recent, self._waited = self.cores, None, None
                self._check_every = self.explore_every
            return
        self._waited = waited if self._waited is None else (1 - SMOOTHING) * self._waited + SMOOTHING * waited
        slow = False
        if threads == self.cores and step:
            if waited <= NOT_WAITED:
                idle = self._idle = milliseconds if idle is None else min(idle * 1.002, milliseconds)
            recent = self._recent
            self._recent = milliseconds if recent is None else (1 - SMOOTHING) * recent + SMOOTHING * milliseconds
            slow = idle is not None and self._recent > SLOW * idle
        if self.current > 1 and (self._waited > WAITED or slow):
            self.current, self._recent, self._waited = self.current - 1, None, None
            self._until_check = self._check_every
