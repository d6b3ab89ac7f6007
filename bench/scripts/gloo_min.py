"""The smallest distributed job: join a gloo group, all_reduce one value, barrier, exit."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.ones(1)
dist.all_reduce(value)
assert int(value.item()) == dist.get_world_size(), value
dist.barrier()
dist.destroy_process_group()
