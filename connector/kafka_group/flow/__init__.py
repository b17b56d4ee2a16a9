"""Flow control: pausing and resuming partitions, the control channel to the Spark glue, event-time alignment."""
