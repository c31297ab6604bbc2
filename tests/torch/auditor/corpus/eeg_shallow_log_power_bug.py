# Shallow ConvNet for EEG trial classification. Layers: temporal conv, spatial
# conv, square, mean pooling, log (log band power) (pattern: braindecode ShallowFBCSPNet,
# which later wrapped this log in `safe_log`).
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class ShallowNet(nn.Module):
    def __init__(self, n_chans=8, n_classes=4, n_filters=8):
        super().__init__()
        self.conv_time = nn.Conv2d(1, n_filters, (1, 13), bias=False)
        self.conv_spat = nn.Conv2d(n_filters, n_filters, (n_chans, 1), bias=False)
        self.pool = nn.AvgPool2d((1, 35), stride=(1, 7))
        self.classifier = nn.Linear(n_filters * 22, n_classes)

    def forward(self, x):                      # x: (B, 1, chans, time)
        x = self.conv_spat(self.conv_time(x))
        x = self.pool(x * x)
        x = torch.log(x)  # ORIGIN
        return self.classifier(x.flatten(1))


n_trials, n_chans, n_times = 96, 8, 200
signals = torch.randn(n_trials, 1, n_chans, n_times)
labels = torch.randint(0, 4, (n_trials,))
loader = DataLoader(TensorDataset(signals, labels), batch_size=16, shuffle=True)

model = ShallowNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(3):
    for xb, yb in loader:
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
