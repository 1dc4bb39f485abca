"""StopVote and other orchestration environments (Gymnasium)."""
