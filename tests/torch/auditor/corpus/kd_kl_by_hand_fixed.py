# Knowledge distillation with a hand-written KL divergence between the
# temperature-softened teacher and student distributions
# (pattern: yzd-v/cls_KD#13 "When log and softmax are separate ... loss is nan").
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

teacher = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10)).eval()
student = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10))
optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)

X = torch.randn(320, 32)
y = torch.randint(0, 10, (320,))
loader = DataLoader(TensorDataset(X, y), batch_size=64, shuffle=True)
T, alpha = 4.0, 0.9

for epoch in range(3):
    for xb, yb in loader:
        with torch.no_grad():
            t_logits = teacher(xb)
        s_logits = student(xb)
        p_t = F.softmax(t_logits / T, dim=1)
        p_s = F.softmax(s_logits / T, dim=1)
        kd = F.kl_div(F.log_softmax(s_logits / T, dim=1), F.log_softmax(t_logits / T, dim=1),
                      reduction="batchmean", log_target=True) * T * T
        loss = alpha * kd + (1 - alpha) * F.cross_entropy(s_logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} kd {kd.item():.4f} loss {loss.item():.4f}")
