"""Errors of the Slurm bridge (under agents.errors.AgentError)."""

from __future__ import annotations

from agents.errors import AgentError

__all__ = ["SlurmCommandError", "SlurmError"]


class SlurmError(AgentError):
    """The Slurm bridge cannot go on (a command missing, a cluster that does not answer)."""


class SlurmCommandError(SlurmError):
    """A Slurm command exited non-zero; the message carries its stderr."""
