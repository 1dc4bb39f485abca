"""Reward families R1-R8 as functions ``trace -> named channels``; specs (TOML or Python); schedules."""

from .channels import STEP_TYPES, RewardOut
from .families import r1_team, r2_agent, r3_role, r4_process, r5_tool, r6_verifier
from .orchestration import critical_steps, r7_orchestration
from .schedule import Schedule
from .spec import (
    CHANNEL_ALIASES,
    CHANNEL_FAMILY,
    Caps,
    Hooks,
    RewardSpec,
    Term,
    apply_rewards,
    channel_value,
    compute_rewards,
    hybrid,
    load_spec,
    spec_from_dict,
    with_rewards,
)

__all__ = [
    "CHANNEL_ALIASES",
    "CHANNEL_FAMILY",
    "STEP_TYPES",
    "Caps",
    "Hooks",
    "RewardOut",
    "RewardSpec",
    "Schedule",
    "Term",
    "apply_rewards",
    "channel_value",
    "compute_rewards",
    "critical_steps",
    "hybrid",
    "load_spec",
    "r1_team",
    "r2_agent",
    "r3_role",
    "r4_process",
    "r5_tool",
    "r6_verifier",
    "r7_orchestration",
    "spec_from_dict",
    "with_rewards",
]
