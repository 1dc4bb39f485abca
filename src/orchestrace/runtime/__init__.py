"""Runtime: record, run, replay and fork multi-agent systems; everything it produces is a trace."""

from ..core.build import infer_edge_type
from .recorder import Recorder
from .repair import repair, repair_log

__all__ = ["Recorder", "infer_edge_type", "repair", "repair_log"]
