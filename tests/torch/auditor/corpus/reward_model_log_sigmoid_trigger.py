# -log(sigmoid(x)) for a finite reward gap x = -100: sigmoid underflows to 0
# and the loss is inf (deepspeedai/DeepSpeedExamples#423 table).
import torch

torch.manual_seed(0)
chosen_reward = torch.tensor([-60.0], requires_grad=True)
rejected_reward = torch.tensor([40.0])
loss = -torch.log(torch.sigmoid(chosen_reward - rejected_reward)).mean()
loss.backward()
print("loss =", loss.item(), "grad =", chosen_reward.grad)
if not torch.isfinite(loss) or not torch.isfinite(chosen_reward.grad).all():
    print("TRIGGERED")
