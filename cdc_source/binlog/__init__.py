"""The binlog's wire format, read by this project itself: the replication connection,
event framing, compression, table maps and transaction boundaries.

Shared by the driver (it scans ranges for XA transactions) and the executors (they decode
rows). Row images are decoded in ``reader`` (a C extension, or its pure-Python twin).
"""
