"""Many ranks, one story: who wrote each log line, and lines several ranks share shown once.

Pure (no I/O, no clock of its own): ``ranks`` reads the node agent's console prefix
(``[default3]:``) back into a rank, ``urgent`` tells warnings, errors, tracebacks and
debugger prompts apart (they are never filtered out), ``merge`` collapses a line several ranks
wrote into one ``[train ranks 0-7] Epoch 3: starting``. The CLI feeds it lines and renders
what comes out (docs/logs.md).
"""
