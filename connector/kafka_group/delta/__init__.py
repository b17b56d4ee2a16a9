"""Delta Lake: the offsets table and the exactly-once commit, data files, schema evolution."""
