"""Metrics the ranks logged, read back: ``reader`` (files, per-rank views, the ASCII chart),
``summary`` (the latest values per rank, read from the end), ``compare`` (apps side by side).
"""
