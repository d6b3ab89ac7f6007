"""The Kubernetes backend: Indexed Job + headless Service (backend, render, client, status)."""
