"""The c10d store node 0's agent hosts for every rank (torchrun's agent store), torch-free."""

from trainlaunch.agent.tcpstore.listen import only_this_host
from trainlaunch.agent.tcpstore.server import TCPStoreServer

__all__ = ["TCPStoreServer", "only_this_host"]
