"""Observation spaces of environments that replay data."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


def data_box(rows: np.ndarray) -> gym.spaces.Box:
    """[min(0, data min), max(1, data max)] per feature, for envs that only ever show features of
    the data they replay (a column that is constant in the data still gets a non-empty range)."""
    rows = np.asarray(rows, np.float32)
    low = np.minimum(rows.min(axis=0), 0.0)
    high = np.maximum(rows.max(axis=0), 1.0)
    return gym.spaces.Box(low, high, (rows.shape[1],), np.float32)
