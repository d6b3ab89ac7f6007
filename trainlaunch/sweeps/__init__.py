"""Sweeps: one component over a grid or random search of parameters and seeds.

``grammar`` is the pure part (``--param``/``--seeds``/``--random``, points, substitution);
``runs`` plans, submits and records a sweep's points through the Runner.
"""
