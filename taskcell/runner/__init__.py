"""taskcell.runner."""
