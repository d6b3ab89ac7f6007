"""The local backend: detached, persisted apps on this machine (backend, state, supervisor)."""
