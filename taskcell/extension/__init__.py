"""taskcell.extension."""
