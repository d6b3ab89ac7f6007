"""``python -m trainlaunch.node.freeport``: print a free TCP port of this host, parked.

The Slurm batch script runs it on rank 0's node (the batch host) to choose the rendezvous
port when the job starts: a port that cannot be derived from the job id (another user on
the cluster cannot guess it), that no other job's ``bind(0)`` takes before node 0's agent
binds it (``reserve_port`` parks it in TIME_WAIT).
"""

from __future__ import annotations

from trainlaunch.node.processes import reserve_port


def main() -> None:
    """Print the port."""
    print(reserve_port("0.0.0.0"))  # free on every interface, as the agent's store binds


if __name__ == "__main__":
    main()
