"""What runs on a node, shared by the local supervisor, the node agent and the Slurm replica
runner: process identity and signalling (``processes``), stdout+stderr in arrival order
(``interleave``), the devices a job may use (``devices``), the agent's record
(``agent_record``), and the signal handler the CLI installs as its first lines
(``interrupts``: no import of its own). Torch-free; imports only the nouns below it.
"""
