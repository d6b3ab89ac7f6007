"""`trainlaunch top`: running apps, live, in the terminal (docs/top.md)."""
