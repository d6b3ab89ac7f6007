"""Where an app's ranks are: ``values`` (stack dumps as values, grouped and rendered; pure),
``dump`` (py-spy run on the ranks, all at once) and ``progress`` (each rank's last sign of life,
what stragglers and hangs are read from).
"""
