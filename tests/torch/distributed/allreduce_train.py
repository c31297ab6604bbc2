"""A data-parallel training loop with a hand-written gradient all-reduce, for torchrun.

Run by test_ranks.py as ``torchrun --nproc_per_node 2 -m nanguard run --json-dir DIR
allreduce_train.py [--healthy]``. Without --healthy, rank 1 makes a NaN at step 3 (the line
marked ORIGIN); rank 0 makes none and only receives it through the all-reduce (RECEIVED).
"""

import sys

import torch
import torch.distributed as dist

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
healthy = "--healthy" in sys.argv[1:]
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 5):
    x = torch.rand(8, 4) + 0.5
    out = model(x)
    if rank == 1 and step == 3 and not healthy:
        out = torch.log(out - 100.0)  # ORIGIN
    loss = out.pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)  # RECEIVED
        p.grad /= dist.get_world_size()
    opt.step()
    opt.zero_grad()
print(f"rank {rank} done, loss {loss.item()}")
dist.destroy_process_group()
