"""Where an app's ranks are: ``values`` (stack dumps as values, grouped and rendered; pure),
``dump`` (py-spy run on the ranks, all at once) and ``progress`` (each rank's last sign of life,
what stragglers and hangs are read from).

The hang options' vocabulary lives here, where every backend's ``run`` options read it without
importing the watchdog (a ``Protocol`` and its helpers: ~4M instructions on each ``run``).
"""

ON_HANG = ("none", "stop", "restart")  # --cfg on_hang=...: what the hang watchdog does

__all__ = ["ON_HANG"]
