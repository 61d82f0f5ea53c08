"""Benchmarks: each script prints its figures and writes bench/results/<name>.json."""
