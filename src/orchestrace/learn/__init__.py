"""Learning orchestration decisions from traces."""
