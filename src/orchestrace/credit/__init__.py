"""Credit assignment: methods x units, exact partition, coalition games; credits live on events."""

from .game import (
    DEPENDENCY_EDGES,
    EXACT_MAX_PLAYERS,
    FnGame,
    Game,
    RemovalGame,
    ShapleyResult,
    leave_one_out,
    removal_game,
    shapley,
)
from .methods import (
    EPS,
    METHODS,
    UnitCredit,
    assign_credit,
    compute_credit,
    default_coma_q,
    normalise,
    partition_gap,
)
from .units import REST, UNITS, Units, owners, unit_keys

__all__ = [
    "DEPENDENCY_EDGES",
    "EPS",
    "EXACT_MAX_PLAYERS",
    "METHODS",
    "REST",
    "UNITS",
    "FnGame",
    "Game",
    "RemovalGame",
    "ShapleyResult",
    "UnitCredit",
    "Units",
    "assign_credit",
    "compute_credit",
    "default_coma_q",
    "leave_one_out",
    "normalise",
    "owners",
    "partition_gap",
    "removal_game",
    "shapley",
    "unit_keys",
]
