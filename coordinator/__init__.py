"""Driver-only planning of micro-batches: splitter, planner, split metadata registry."""
