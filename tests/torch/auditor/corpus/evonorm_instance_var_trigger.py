# Unbiased variance over a 1x1 spatial map (e.g. a 4x4 input after two stride-2
# convs): one element, N - 1 = 0 degrees of freedom -> 0 / 0 = NaN.
import warnings
import torch

torch.manual_seed(0)
warnings.simplefilter("ignore")
x = torch.randn(2, 32, 1, 1)
var = torch.var(x, dim=(2, 3), keepdim=True)
std = torch.sqrt(var + 1e-5)
print("var[0,:4] =", var[0, :4].flatten())
if not torch.isfinite(std).all():
    print("TRIGGERED")
