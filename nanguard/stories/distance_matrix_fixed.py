"""The distance-matrix story, fixed: `nanguard.distance_matrix` has a finite gradient.

The naive version (`distance_matrix_nan.py`) takes sqrt of a matrix whose diagonal is exactly
0, and sqrt's gradient there is infinite. `nanguard.distance_matrix(x)` returns the same
distances with gradient 0 on the diagonal (the minimum-norm subgradient), so training works:

    nanguard run -m nanguard.stories.distance_matrix_fixed
"""

import torch

import nanguard


def main(steps: int = 5) -> float:
    torch.manual_seed(0)
    L = 10
    pred_coordinates = torch.randn(L, 3, requires_grad=True)
    true_coordinates = torch.randn(L, 3, requires_grad=False)
    obj = torch.nn.MSELoss()
    optimizer = torch.optim.Adam([pred_coordinates])

    for i in range(steps):
        optimizer.zero_grad()
        pred_distance_matrix = nanguard.distance_matrix(pred_coordinates)
        true_distance_matrix = nanguard.distance_matrix(true_coordinates)
        loss = obj(pred_distance_matrix, true_distance_matrix)
        loss.backward()
        print(f"step {i + 1}: loss {loss.item():.4f}")
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    main()
