"""Checkpoints of the team's adapters: save (atomically) and load a policy folder, and refuse one
of another base model, LoRA shape or adapter set."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .config import PROGRAM, TeamConfig
from .model import TeamModel, base_model_id
from .program import BadInput

POLICY_FILE = "team.json"


def config_hash(cfg: TeamConfig) -> str:
    d = asdict(cfg)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def save_policy(model: TeamModel, optimizer: Any, folder: Path, cfg: TeamConfig, iteration: int) -> str:
    """Adapters as safetensors (one file each) + team.json + the optimizer state; written to a temp
    folder and renamed, so a killed save leaves no half policy."""
    from safetensors.torch import save_file

    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    meta = {
        "base_model": model.base_id,
        "lora_rank": str(model.lora.rank),
        "lora_alpha": str(model.lora.alpha),
    }
    for name in model.adapters:
        save_file(
            model.adapter_state(name), str(tmp / f"{name}.safetensors"), metadata=meta | {"adapter": name}
        )
    model.torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    info = {
        "base_model": model.base_id,
        "lora": asdict(model.lora),
        "adapters": model.adapters,
        "iteration": iteration,
        "config_hash": config_hash(cfg),
        "program": PROGRAM,
    }
    (tmp / POLICY_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, folder)
    return str(folder)


def load_policy(model: TeamModel, folder: str, optimizer: Any | None = None) -> None:
    """Load adapters (and the optimizer state) written by :func:`save_policy`; refuses another base
    model, LoRA shape or adapter set."""
    from safetensors.torch import load_file

    p = Path(folder)
    info_path = p / POLICY_FILE
    if not info_path.is_file():
        raise BadInput("OT698", f"not a team policy folder (no {POLICY_FILE})", path=str(p))
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise BadInput("OT698", f"unreadable {POLICY_FILE}: {e}", path=str(info_path)) from None
    if info.get("base_model") != model.base_id:
        raise BadInput(
            "OT698",
            f"the adapters were trained on base model {info.get('base_model')!r}, this one is {model.base_id!r}",
            path=str(info_path),
            pointer="/base_model",
        )
    if sorted(info.get("adapters") or []) != sorted(model.adapters):
        raise BadInput(
            "OT698",
            f"the policy has adapters {info.get('adapters')}, this run needs {model.adapters}",
            path=str(info_path),
            pointer="/adapters",
        )
    for name in model.adapters:
        model.load_adapter_state(name, load_file(str(p / f"{name}.safetensors")))
    if optimizer is not None and (p / "optimizer.pt").is_file():
        optimizer.load_state_dict(model.torch.load(p / "optimizer.pt"))


def check_policy_file(folder: str, adapters: list[str]) -> None:
    """Refuse a start policy of another base model or adapter set before loading anything."""

    p = Path(folder) / POLICY_FILE
    try:
        info = json.loads(p.read_bytes())
    except OSError:
        raise BadInput("OT698", f"not a team policy folder (no {POLICY_FILE})", path=folder) from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, nested too deep
        raise BadInput("OT698", f"unreadable {POLICY_FILE}: {e}", path=str(p)) from None
    if not isinstance(info, dict):  # info.get: an internal error
        raise BadInput("OT698", f"{POLICY_FILE} is a JSON {type(info).__name__}, not an object", path=str(p))
    names = info.get("adapters")
    if not isinstance(names, list) or not all(isinstance(a, str) for a in names):  # sorted([1, "a"])
        raise BadInput(
            "OT698", f"adapters must be a list of names, got {names!r:.80}", path=str(p), pointer="/adapters"
        )
    if info.get("base_model") != base_model_id():
        raise BadInput(
            "OT698",
            f"the adapters were trained on base model {info.get('base_model')!r}, this one is {base_model_id()!r}",
            path=str(p),
            pointer="/base_model",
        )
    if sorted(info.get("adapters") or []) != sorted(adapters):
        raise BadInput(
            "OT698",
            f"the policy has adapters {info.get('adapters')}, this run needs {adapters}",
            path=str(p),
            pointer="/adapters",
        )
