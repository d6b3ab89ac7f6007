"""What `trainlaunch top` and `trainlaunch ui` show: JSON-able snapshots of the apps, one app,
a sweep and a log tail, built from the Runner and the documents the CLI's ``--json`` prints
(cli/render.py), so the terminal, the web page and scripts read one set of facts.

Each function takes a Runner and returns plain dicts; a :class:`~.rates.RateBook` carried from
one refresh to the next turns counters (steps, CPU seconds) into rates.
"""
