"""Executor-only reading: chunks normalized to a position, binlog ranges, Arrow batches."""
