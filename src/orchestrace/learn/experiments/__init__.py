"""The experiments behind ``orchestrace train|eval retry|delegate|swarm`` (public data, seeded splits)."""

from .delegate import eval_delegate, train_delegate, train_delegate_logged
from .protocol import SPLIT_SEED, Trained, split, write_trained
from .retry import eval_retry, train_retry
from .swarm import SWARM_TEST_SEED, eval_swarm, eval_swarm_parallel, train_swarm, train_swarm_parallel

__all__ = [
    "SPLIT_SEED",
    "SWARM_TEST_SEED",
    "Trained",
    "eval_delegate",
    "eval_retry",
    "eval_swarm",
    "eval_swarm_parallel",
    "split",
    "train_delegate",
    "train_delegate_logged",
    "train_retry",
    "train_swarm",
    "train_swarm_parallel",
    "write_trained",
]
