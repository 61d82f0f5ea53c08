"""Errors of the network model (children of the decision core's ScorerError).

    ScorerError
    └── NetworkError             the link graph or a flow cannot be used
        └── UnknownLinkError     a path or quota names a link the graph does not hold

A region pair with no path is not an error: `LinkGraph.path` returns None.
"""

from __future__ import annotations

from scorer.errors import ScorerError

__all__ = ["NetworkError", "UnknownLinkError"]


class NetworkError(ScorerError):
    """The link graph, a flow or an allocation request is inconsistent."""


class UnknownLinkError(NetworkError, KeyError):
    """A link id the graph does not hold."""
