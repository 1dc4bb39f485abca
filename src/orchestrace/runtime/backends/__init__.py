"""LLM backends: one protocol (``base.Backend``), several implementations, imported lazily."""
