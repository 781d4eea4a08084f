"""taskcell.export."""
