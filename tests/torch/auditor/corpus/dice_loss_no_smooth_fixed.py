# Binary segmentation with a soft Dice loss without smoothing term
# (pattern: pytorch/pytorch#1249 dice-loss thread, "set smooth to zero and add
# eps to the denominator to prevent division by zero").
import torch
import torch.nn as nn

torch.manual_seed(0)


def dice_loss(logits, target):
    p = torch.sigmoid(logits)
    inter = (p * target).sum(dim=(1, 2, 3))
    dice = (2.0 * inter + 1.0) / (p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3)) + 1.0)
    return 1.0 - dice.mean()


net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

images = torch.rand(32, 1, 16, 16)
masks = (images > 0.8).float()
masks[::4] = 0.0          # a quarter of the slices contain no foreground

for step in range(8):
    idx = torch.randint(0, 32, (8,))
    loss = dice_loss(net(images[idx]), masks[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} dice loss {loss.item():.4f}")
