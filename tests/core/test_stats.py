"""core.stats.mean_ci, the one mean-with-bootstrap-CI of the reports, on values worked out by hand."""

from __future__ import annotations

import math

import numpy as np

from orchestrace.core.stats import mean_ci


def test_a_constant_has_a_point_interval():
    assert mean_ci(np.array([0.25, 0.25, 0.25])) == (0.25, (0.25, 0.25))


def test_two_items_span_from_one_to_the_other():
    # resampling 2 items gives means 0, 0.5 or 1 (a quarter of the time each extreme): with 1,000
    # resamples the 2.5th and 97.5th percentiles are the extremes
    mean, (lo, hi) = mean_ci(np.array([0, 1]), n_boot=1000, seed=3)
    assert (mean, lo, hi) == (0.5, 0.0, 1.0)


def test_no_items_is_nan():
    mean, (lo, hi) = mean_ci(np.array([]))
    assert math.isnan(mean) and math.isnan(lo) and math.isnan(hi)
