"""Adapters that put flashindexer under an inference engine's indexer call."""
