"""Executor-side reading: the fetch loop, the pool of reusable consumers, the Arrow record schema."""
