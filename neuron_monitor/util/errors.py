"""The error a collection raises when it fails in an expected way.

It lives below both the source layer (``neuron/``, ``host/``) and the groups so that a reader of a source can raise
it without importing the group contract (``groups/base.py`` re-exports it for groups).
"""

from __future__ import annotations


class GroupError(Exception):
    """A collection failed in an expected way; the message becomes the group's ``error``."""
