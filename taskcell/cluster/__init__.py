"""taskcell.cluster."""
