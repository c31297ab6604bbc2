# Federated-style client update with a custom objective exp(CE / eta)
# (pattern: StackOverflow "Weird behaviour of loss function in pytorch").
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

client_model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = torch.optim.SGD(client_model.parameters(), lr=0.05)
criterion = nn.CrossEntropyLoss()
eta = 2

data = torch.randn(160, 8, 8)
target = torch.randint(0, 4, (160,))
train_loader = DataLoader(TensorDataset(data, target), batch_size=32, shuffle=True)

e_loss = []
for e in range(3):
    train_loss = 0
    for batch_idx, (data_b, target_b) in enumerate(train_loader):
        client_model.train()
        optimizer.zero_grad()
        output = client_model(data_b)
        loss = torch.exp(torch.clamp(criterion(output, target_b) / eta, max=50.0))
        loss.backward()
        optimizer.step()
        train_loss += loss.item() * data_b.size(0)
    train_loss = train_loss / len(train_loader)
    e_loss.append(train_loss)
    print(f"epoch {e} loss {train_loss:.4f}")
