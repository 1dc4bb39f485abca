"""Small MLP stopping policy over prefix features; numpy inference, safetensors + JSON on disk.

Training builds the torch twin (``torch_actor``) and copies weights back; running a saved policy
needs numpy and safetensors only. ``X.safetensors`` holds the weights (the config is also in its
metadata); ``X.json`` holds the config for humans and other tools.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import msgspec
import numpy as np

from ...core.errors import BadInput, OrchestraceError
from ...core.paths import make_dirs
from .aggregate import Aggregator
from .features import FEATURE_NAMES, FEATURE_SETS, feature_names

#: what a policy file of another decision (its header's ``orchestrace.decision``) is, in words
DECISION_NAMES = {
    "aggregate": "an answer aggregator (train stop's -aggregator file: it picks the answer, it does not stop)",
    "retry_stop": "a RetryStop policy (give up or retry)",
    "delegate": "a Delegate routing policy",
    "spawn": "a Swarm spawn-width policy",
}


@dataclass
class PolicyConfig:
    features: list[str] = field(default_factory=lambda: list(FEATURE_NAMES))
    # "counts" (answer counts only; every file written before feature sets had names) or
    # "counts+confidence" (also token log-probabilities: refuses samples without them, OT624)
    feature_set: str = "counts"
    # what the policy answers at its stop: "majority" (every file written before this field) or
    # "confidence" (the leader of votes weighted by exp(mean token log-prob); offline only so far)
    answer: str = "majority"
    hidden: list[int] = field(default_factory=lambda: [32, 32])
    activation: str = "tanh"
    budget: int = 40
    cost: float = 0.01
    threshold: float = 0.5  # stop when P(stop) >= threshold (greedy evaluation)
    algorithm: str = ""
    trained_on: list[str] = field(default_factory=list)
    seed: int = 0
    aggregator: list[float] | None = (
        None  # learned aggregator weights (``aggregate.CAND_FEATURES``); None: majority
    )
    # a randomised mixture (a sample budget between two trained costs, ``stop.calibrate_cost``):
    # per question, the ``alt`` policy trained at cost ``mixture["cost"]`` runs with probability
    # ``mixture["prob"]``, this one otherwise; None: a single policy
    mixture: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_KNOWN_FIELDS = frozenset(f.name for f in fields(PolicyConfig))


def _read_config(text: str, path: str) -> PolicyConfig:
    """A policy config with its types and ranges checked: fields were taken as given, so a threshold
    of 2 (or NaN) never stopped, an activation of "bogus" ran as relu and a budget of "4" was a string."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise TypeError(f"a JSON {type(raw).__name__}, not an object")
        if unknown := sorted(set(raw) - _KNOWN_FIELDS):
            raise TypeError(f"unknown field(s) {', '.join(unknown)}")
        config = msgspec.convert(raw, PolicyConfig)
    except (TypeError, ValueError, RecursionError, msgspec.ValidationError) as e:  # JSONDecodeError, too deep
        raise BadInput("OT622", f"bad policy config: {e}", path=path) from None
    checks = (
        (config.activation in ("tanh", "relu"), f"activation {config.activation!r} is not tanh or relu"),
        (config.budget >= 2, f"budget must be >= 2, got {config.budget}"),
        (
            np.isfinite(config.cost) and config.cost >= 0,
            f"cost must be a finite number >= 0, got {config.cost}",
        ),
        (bool(0 <= config.threshold <= 1), f"threshold must be in [0, 1], got {config.threshold}"),
        (all(h >= 1 for h in config.hidden), f"hidden layer sizes must be >= 1, got {config.hidden}"),
        (
            config.aggregator is None or bool(np.all(np.isfinite(config.aggregator))),
            "aggregator weights must be finite",
        ),
    )
    for ok, message in checks:
        if not ok:
            raise BadInput("OT622", f"bad policy config: {message}", path=path)
    return config


class StopPolicy:
    """Maps features [N, F] to P(stop) [N]; ``alt`` is the second policy of a mixture."""

    def __init__(
        self,
        config: PolicyConfig,
        weights: list[tuple[np.ndarray, np.ndarray]],
        alt: StopPolicy | None = None,
    ) -> None:
        self.config = config
        self.weights = [(np.asarray(w, np.float32), np.asarray(b, np.float32)) for w, b in weights]
        if (alt is None) != (config.mixture is None):
            raise ValueError("a mixture needs both config.mixture and the alt policy")
        self.alt = alt

    def mixed_with(self, alt: StopPolicy, prob: float) -> StopPolicy:
        """This policy, replaced by ``alt`` on a random share ``prob`` of questions."""
        cfg = replace(self.config, mixture={"prob": float(prob), "cost": alt.config.cost})
        return StopPolicy(cfg, self.weights, StopPolicy(replace(alt.config, mixture=None), alt.weights))

    @property
    def confidence(self) -> bool:
        """Whether the policy reads token log-probabilities (feature set ``counts+confidence``)."""
        return self.config.feature_set == "counts+confidence"

    @property
    def aggregator(self) -> Aggregator | None:
        return None if self.config.aggregator is None else Aggregator(tuple(self.config.aggregator))

    @classmethod
    def init(cls, config: PolicyConfig, seed: int = 0) -> StopPolicy:
        rng = np.random.default_rng(seed)
        sizes = [len(config.features), *config.hidden, 1]
        ws = []
        for i, o in zip(sizes[:-1], sizes[1:], strict=True):
            ws.append((rng.normal(0, 1 / np.sqrt(i), (o, i)).astype(np.float32), np.zeros(o, np.float32)))
        return cls(config, ws)

    def logits(self, x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, np.float32)
        for i, (w, b) in enumerate(self.weights):
            h = h @ w.T + b
            if i < len(self.weights) - 1:
                h = np.tanh(h) if self.config.activation == "tanh" else np.maximum(h, 0)
        return h[..., 0]

    def stop_prob(self, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.logits(x)))

    def stops(self, x: np.ndarray, threshold: float | None = None) -> np.ndarray:
        thr = self.config.threshold if threshold is None else threshold
        return self.stop_prob(x) >= thr

    # ------------------------------------------------------------ torch twin
    def torch_actor(self) -> Any:
        import torch
        from torch import nn

        layers: list[nn.Module] = []
        for i, (w, b) in enumerate(self.weights):
            lin = nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(w))
                lin.bias.copy_(torch.from_numpy(b))
            layers.append(lin)
            if i < len(self.weights) - 1:
                layers.append(nn.Tanh() if self.config.activation == "tanh" else nn.ReLU())
        return nn.Sequential(*layers)

    @classmethod
    def from_torch(cls, config: PolicyConfig, actor: Any) -> StopPolicy:
        from torch import nn

        lins = [m for m in actor if isinstance(m, nn.Linear)]
        return cls(config, [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy()) for m in lins])

    # ------------------------------------------------------------ files
    def save(self, path: str) -> tuple[str, str]:
        from safetensors.numpy import save as tensor_bytes

        base = path.removesuffix(".safetensors").removesuffix(".json")
        cfg = json.dumps(asdict(self.config), indent=2, sort_keys=True)
        tensors = {}
        for prefix, pol in [("", self)] + ([("alt.", self.alt)] if self.alt is not None else []):
            for i, (w, b) in enumerate(pol.weights):
                tensors[f"{prefix}layers.{i}.weight"] = w
                tensors[f"{prefix}layers.{i}.bias"] = b
        d = os.path.dirname(base)
        if d:
            make_dirs(d)
        # written like the .json twin (safetensors' save_file creates files mode 0600)
        with open(base + ".safetensors", "wb") as f:
            f.write(
                tensor_bytes(tensors, metadata={"orchestrace.policy": cfg, "orchestrace.decision": "stop"})
            )
        with open(base + ".json", "w") as f:
            f.write(cfg + "\n")
        return base + ".safetensors", base + ".json"

    @classmethod
    def load(cls, path: str) -> StopPolicy:
        from safetensors import safe_open

        base = path.removesuffix(".safetensors").removesuffix(".json")
        st = base + ".safetensors"
        if not os.path.isfile(st):
            raise OrchestraceError(
                "OT620", "policy weights not found (expected a .safetensors file)", path=st
            )
        try:
            with safe_open(st, framework="numpy") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118
        except Exception as e:  # safetensors raises its own error types for corrupt headers
            raise BadInput("OT621", f"not a safetensors file: {e}", path=st) from None
        decision = meta.get("orchestrace.decision", "stop")
        if decision != "stop":  # e.g. train stop's -aggregator file beside the stop policies
            what = DECISION_NAMES.get(decision, f"a {decision!r} policy")
            raise BadInput("OT606", f"this file is {what}, not a stop policy", path=st)
        cfg_text = None
        if os.path.isfile(base + ".json"):
            try:
                with open(base + ".json", encoding="utf-8-sig") as f:  # one BOM, as every reader
                    cfg_text = f.read()
            except UnicodeDecodeError as e:  # an internal error (exit 3)
                raise BadInput("OT622", f"bad policy config: not UTF-8 ({e.reason} at byte {e.start})",
                               path=base + ".json") from None  # fmt: skip
        cfg_text = cfg_text or meta.get("orchestrace.policy")
        if not cfg_text:
            raise BadInput("OT622", "policy config missing (no .json and no metadata)", path=st)
        config = _read_config(cfg_text, base + ".json")
        n = len(config.hidden) + 1

        def layers(prefix: str) -> list[tuple[np.ndarray, np.ndarray]]:
            try:
                return [
                    (tensors[f"{prefix}layers.{i}.weight"], tensors[f"{prefix}layers.{i}.bias"])
                    for i in range(n)
                ]
            except KeyError as e:
                raise BadInput("OT621", f"policy weights lack tensor {e}", path=st) from None

        if config.feature_set not in FEATURE_SETS:
            raise BadInput("OT622", f"unknown feature_set {config.feature_set!r}; known: "
                           f"{', '.join(FEATURE_SETS)}", path=base + ".json")  # fmt: skip
        if config.answer not in ("majority", "confidence"):
            raise BadInput("OT622", f"unknown answer {config.answer!r}; known: majority, confidence",
                           path=base + ".json")  # fmt: skip
        confidence = config.feature_set == "counts+confidence"
        if list(config.features) != feature_names(config.aggregator is not None, confidence):
            raise BadInput("OT622", "policy was trained on a different feature set", path=base + ".json")
        alt = None
        mix = config.mixture
        if mix is not None:
            if (
                not isinstance(mix, dict)
                or set(mix) != {"prob", "cost"}
                or not all(isinstance(v, int | float) for v in mix.values())
                or not 0.0 <= mix["prob"] <= 1.0
                or not (np.isfinite(mix["cost"]) and mix["cost"] >= 0)
            ):
                raise BadInput(
                    "OT622",
                    'mixture must be {"prob": p in [0, 1], "cost": c (finite, >= 0)}',
                    path=base + ".json",
                )
            alt_cfg = replace(config, cost=float(mix["cost"]), mixture=None)
            alt = cls(alt_cfg, layers("alt."))
        return cls(config, layers(""), alt)
