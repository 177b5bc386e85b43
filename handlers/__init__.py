"""The decision core: pure functions from plain data to the decision for one turn (no I/O)."""
