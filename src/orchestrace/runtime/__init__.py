"""Runtime: record, run, replay and fork multi-agent systems; everything it produces is a trace."""

from .recorder import Recorder, infer_edge_type
from .repair import repair, repair_log

__all__ = ["Recorder", "infer_edge_type", "repair", "repair_log"]
