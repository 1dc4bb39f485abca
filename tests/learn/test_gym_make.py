"""Every registered environment is made by ``gymnasium.make(id)`` alone, takes its data as an
object, a name or a file path, says which argument is wrong, and Stable-Baselines3 trains on it.

Issue 34: four of the five could not be made without objects built with internal loaders, and
``gymnasium.make("orchestrace/StopVote-v0", bank="continents")`` raised AttributeError.
"""

from __future__ import annotations

import gzip
import os
from importlib import resources
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import orchestrace.learn.envs  # noqa: F401 - registers the orchestrace/ ids
from orchestrace.learn.datasets import RouteData
from orchestrace.learn.envs import ENV_IDS
from orchestrace.learn.envs.defaults import EnvArgumentError, route_arg, route_lines, tasks_arg
from orchestrace.learn.stopping.banks import default_bank, save_bank

if not os.environ.get("CI"):
    pytest.importorskip(
        "stable_baselines3", reason="Stable-Baselines3 not installed (scripts/install.sh --test)"
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_sb3_ppo_trains_on_each_env_made_by_id_alone(env_id: str, tmp_path: Path) -> None:
    """A few hundred PPO steps on the embedded default; the trained policy acts in the space."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure

    torch.set_num_threads(1)
    env = gymnasium.make(env_id)
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0, device="cpu")
    model.set_logger(configure(str(tmp_path / "sb3"), []))  # not a SB3-<time> folder in /tmp per run
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    obs, _ = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(int(action))
    env.step(int(action))


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_each_default_env_passes_check_env_with_no_warning(env_id: str) -> None:
    """Made by its id alone, each passes Gymnasium's checker, every warning an error."""
    import warnings

    from gymnasium.utils.env_checker import check_env

    env = gymnasium.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)


def _write_bank(tmp_path: Path) -> str:
    p = tmp_path / "bank.jsonl"
    save_bank(default_bank("continents"), str(p))
    return str(p)


def _write_tasks(tmp_path: Path) -> str:
    p = tmp_path / "tasks.jsonl"
    shipped = resources.files("orchestrace.learn.envs") / "data" / "humaneval-excerpt.jsonl.gz"
    p.write_bytes(gzip.decompress(shipped.read_bytes()))
    return str(p)


def _write_outcomes(tmp_path: Path) -> str:
    p = tmp_path / "outcomes.jsonl"
    p.write_bytes(b"\n".join(route_lines(route_arg("gsm8k-excerpt"))) + b"\n")
    return str(p)


@pytest.mark.parametrize(
    ("env_id", "arg", "value"),
    [
        ("orchestrace/StopVote-v0", "bank", "continents"),
        ("orchestrace/StopVote-v0", "bank", _write_bank),
        ("orchestrace/StopVote-v0", "bank", lambda _: default_bank("plurals")),
        ("orchestrace/RetryStop-v0", "tasks", "humaneval-excerpt"),
        ("orchestrace/RetryStop-v0", "tasks", _write_tasks),
        ("orchestrace/RetryStop-v0", "tasks", lambda _: tasks_arg("humaneval-excerpt")[:3]),
        ("orchestrace/Delegate-v0", "data", "gsm8k-excerpt"),
        ("orchestrace/Delegate-v0", "data", _write_outcomes),
        ("orchestrace/DelegateCascade-v0", "data", _write_outcomes),
        ("orchestrace/DelegateCascade-v0", "data", lambda _: route_arg("gsm8k-excerpt")),
    ],
)
def test_data_as_a_name_a_path_or_an_object(tmp_path: Path, env_id: str, arg: str, value) -> None:
    given = value(tmp_path) if callable(value) else value
    env = gymnasium.make(env_id, **{arg: given})
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


def test_a_file_holds_what_its_object_holds(tmp_path: Path) -> None:
    """The outcomes file round-trips the shipped excerpt (the format the README documents)."""
    a, b = route_arg("gsm8k-excerpt"), route_arg(_write_outcomes(tmp_path))
    assert isinstance(b, RouteData) and (a.ids, a.models, a.responses) == (b.ids, b.models, b.responses)
    assert np.array_equal(a.quality, b.quality) and np.array_equal(a.cost, b.cost)
    assert len(a.ids) == 36 and len(tasks_arg("humaneval-excerpt")) == 12  # 40 prompts, 4 contaminated


@pytest.mark.parametrize(
    ("env_id", "arg", "value", "said"),
    [
        ("orchestrace/StopVote-v0", "bank", "contnents", "no such bank file, nor an embedded bank"),
        ("orchestrace/StopVote-v0", "bank", 5, "is not a Bank"),
        ("orchestrace/RetryStop-v0", "tasks", "humaneva", "is not a known name or a file"),
        ("orchestrace/RetryStop-v0", "tasks", [], "is not a non-empty list of RetryTask"),
        ("orchestrace/RetryStop-v0", "tasks", "{bad}", "cannot be read as JSONL"),
        ("orchestrace/Delegate-v0", "data", {"q": 1}, "is not a RouteData"),
        ("orchestrace/Delegate-v0", "data", "{bad}", "cannot be read as JSONL"),
        ("orchestrace/DelegateCascade-v0", "data", "{tasks}", "is not an outcomes file"),
    ],
)
def test_a_wrong_value_names_the_argument(tmp_path: Path, env_id: str, arg: str, value, said: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    if isinstance(value, str):
        value = value.format(bad=bad, tasks=_write_tasks(tmp_path))
    with pytest.raises(EnvArgumentError) as e:
        gymnasium.make(env_id, **{arg: value})
    assert f"{env_id.split('/')[1]}: {arg}=" in str(e.value) and said in str(e.value), str(e.value)


def test_a_public_data_name_without_the_data_names_the_excerpt(monkeypatch, tmp_path: Path) -> None:
    """tasks="humaneval" reads the full public data set; when it is not there the error says
    so and names the shipped excerpt, which needs nothing."""
    monkeypatch.setenv("ORCHESTRACE_DATA", str(tmp_path))
    with pytest.raises(EnvArgumentError, match="humaneval-excerpt"):
        gymnasium.make("orchestrace/RetryStop-v0", tasks="humaneval")
    with pytest.raises(EnvArgumentError, match="gsm8k-excerpt"):
        gymnasium.make("orchestrace/Delegate-v0", data="mmlu")
