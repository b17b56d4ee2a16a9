"""The consumer group: membership, rebalance handling, the user's rebalance listener, cluster metadata."""
