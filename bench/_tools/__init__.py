"""The harness behind `python -m bench`: the registry of benches, the runner, compare, the table.

Not benches themselves (none takes `--out`); the benches are the modules of `bench/`.
"""
