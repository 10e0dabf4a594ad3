"""Utilities shared by every program of the package: command-line conventions (``cli_common``), hostile-input
file reading (``inputfile``) and rate-limited logging (``ratelimit``)."""
