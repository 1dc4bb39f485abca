"""RL algorithms, one readable file each (CleanRL style)."""
