"""taskcell.widgets."""
