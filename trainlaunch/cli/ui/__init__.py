"""`trainlaunch ui`: a read-only dashboard on a local web page (docs/ui.md)."""
