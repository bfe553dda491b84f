"""Where generation starts: the top-n of a start's next-token row."""

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cpc.start import _best
from tests.support.strategies import examples

ROWS = hnp.arrays(
    np.float32,
    st.integers(1, 3000),
    elements=st.one_of(st.floats(-30, 30, width=32), st.just(-np.inf), st.sampled_from([0.0, 1.0])),
)


@settings(max_examples=examples(100), deadline=None)
@given(values=ROWS, n=st.integers(1, 400))
@example(values=np.zeros(2000, np.float32), n=256)  # all tied: the sampled threshold lets every value through
@example(values=np.r_[np.full(1999, -np.inf), 1.0].astype(np.float32), n=256)  # fewer finite values than n
@example(values=np.where(np.arange(3000) % 64 == 0, 1, 0).astype(np.float32), n=256)  # the sample only sees the peaks
def test_the_sampled_threshold_finds_the_values_a_whole_partition_finds(values, n):
    """`_best`'s shortcut keeps exactly the largest values (ties may pick other positions), largest first."""
    got = _best(values, n)
    expected = np.sort(values)[::-1][: min(n, len(values))]
    assert len(got) == len(set(got.tolist())) == len(expected)
    assert np.array_equal(values[got], expected)


def test_a_row_the_size_of_gemmas_vocabulary_agrees_with_a_whole_partition():
    values = np.random.default_rng(0).standard_normal(262_144).astype(np.float32) * 5
    got = _best(values, 256)
    assert np.array_equal(values[got], np.sort(values)[::-1][:256])
