"""The founding seed story: a distance-matrix loss whose gradient is NaN from the first step.

The network predicts 3-D coordinates; the loss compares their pairwise distance matrix with
the true one. The diagonal distance is sqrt(0), whose gradient 1/(2*sqrt(0)) is infinite,
so every coordinate's gradient becomes NaN and the loss prints `nan` from step 2 on.

Run it, then run it under detection to see where and why:

    python -m nanguard.stories.distance_matrix_nan
    nanguard run -m nanguard.stories.distance_matrix_nan
"""

import torch


def compute_distance_matrix(coordinates):
    L = len(coordinates)
    gram_matrix = torch.mm(coordinates, torch.transpose(coordinates, 0, 1))
    gram_diag = torch.diagonal(gram_matrix, dim1=0, dim2=1)
    diag_1 = torch.matmul(gram_diag.unsqueeze(-1), torch.ones(1, L).to(coordinates.device))
    diag_2 = torch.transpose(diag_1, dim0=0, dim1=1)
    return torch.sqrt(diag_1 + diag_2 - (2 * gram_matrix))


def main(steps: int = 5) -> float:
    torch.manual_seed(0)
    L = 10
    pred_coordinates = torch.randn(L, 3, requires_grad=True)
    true_coordinates = torch.randn(L, 3, requires_grad=False)
    obj = torch.nn.MSELoss()
    optimizer = torch.optim.Adam([pred_coordinates])

    for i in range(steps):
        optimizer.zero_grad()
        pred_distance_matrix = compute_distance_matrix(pred_coordinates)
        true_distance_matrix = compute_distance_matrix(true_coordinates)
        loss = obj(pred_distance_matrix, true_distance_matrix)
        loss.backward()
        print(f"step {i + 1}: loss {loss.item():.4f}")
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    main()
