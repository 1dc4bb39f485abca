"""orchestrace: reinforcement learning for LLM multi-agent systems through orchestration traces."""

from .core import Edge, Event, Trace, load, load_one, save

__all__ = ["Edge", "Event", "Trace", "load", "load_one", "save"]
__version__ = "0.1.0"
