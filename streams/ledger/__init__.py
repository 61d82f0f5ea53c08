"""The decision ledger: which jobs are already decided, and its snapshot on disk."""
