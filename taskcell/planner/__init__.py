"""taskcell.planner."""
