# Small CNN whose last layer is a softmax, trained with a hand-written
# cross-entropy on one-hot labels (pattern: tensorflow/models#181).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 7 * 7, 32)
        self.fc2 = nn.Linear(32, n_classes)
        self.log_softmax = nn.LogSoftmax(dim=1)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), 4)
        h = F.relu(self.fc1(h.flatten(1)))
        return self.log_softmax(self.fc2(h))


images = torch.rand(128, 1, 28, 28)
labels = torch.randint(0, 10, (128,))
y_onehot = F.one_hot(labels, 10).float()

model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for step in range(8):
    idx = torch.randint(0, 128, (32,))
    log_prob = model(images[idx])
    cross_entropy = -(y_onehot[idx] * log_prob).sum(dim=1).mean()
    optimizer.zero_grad()
    cross_entropy.backward()
    optimizer.step()
    print(f"step {step} loss {cross_entropy.item():.4f}")
