# Square -> mean-pool -> log: a trial window that is flat (e.g. a disconnected
# or zero-padded recording) gives pooled power exactly 0 and log(0) = -inf.
import torch
import torch.nn as nn

torch.manual_seed(0)
conv_time = nn.Conv2d(1, 8, (1, 13), bias=False)
conv_spat = nn.Conv2d(8, 8, (8, 1), bias=False)
pool = nn.AvgPool2d((1, 35), stride=(1, 7))
x = torch.zeros(1, 1, 8, 200)                # flat trial
h = pool(conv_spat(conv_time(x)) ** 2)
out = torch.log(h)
print("min log-power =", out.min().item())
if not torch.isfinite(out).all():
    print("TRIGGERED")
