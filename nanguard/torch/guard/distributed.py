"""Agreement across data-parallel ranks: every rank skips or steps together.

A rank that skips while its peers step holds different parameters and a different optimizer
step count from then on; a rank that raises while its peers continue leaves them blocked in
their next collective. So the verdict is never local: each rank contributes a one-hot row
(its own flag at its own rank index) and one ``all_reduce(SUM)`` gives every rank the same
vector, which says both *whether* to skip and *which* ranks saw the non-finite values. The
same row carries the values a spike test needs (each rank's loss or gradient norm), so the
ranks judge the same numbers and take the same decision.
"""

from __future__ import annotations

from typing import Any

import torch


def _dist() -> Any:
    import torch.distributed as dist

    return dist


class Agreement:
    """Decides whether the verdict is all-reduced, and does it.

    `enabled=None` (the default) agrees whenever ``torch.distributed`` is initialised;
    True insists on it (an error if it is not initialised); False keeps decisions local.
    """

    def __init__(self, enabled: bool | None = None, group: Any | None = None) -> None:
        if enabled is not None and not isinstance(enabled, bool):
            raise TypeError(f"nanguard.GradGuard: `distributed` must be None, True or False, "
                            f"got {enabled!r}")
        self.enabled = enabled
        self.group = group

    def active(self) -> bool:
        if self.enabled is False:
            return False
        dist = _dist()
        on = dist.is_available() and dist.is_initialized()
        if self.enabled and not on:
            raise RuntimeError(
                "nanguard.GradGuard(distributed=True): torch.distributed is not initialised; "
                "call torch.distributed.init_process_group(...) first, or leave distributed=None"
            )
        return on

    def rank_and_size(self) -> tuple[int, int]:
        dist = _dist()
        return dist.get_rank(self.group), dist.get_world_size(self.group)

    def rank(self) -> int:
        """This process's rank in the group; 0 when agreement is off."""
        return self.rank_and_size()[0] if self.active() else 0

    def _device(self, local: torch.device) -> torch.device:
        # NCCL reduces only CUDA tensors, Gloo is happiest with CPU ones
        backend = str(_dist().get_backend(self.group)).lower()
        if "nccl" in backend and local.type != "cuda":
            return torch.device("cuda", torch.cuda.current_device())
        if backend == "gloo" and local.type != "cpu":
            return torch.device("cpu")
        return local

    def flags(self, local_flag: torch.Tensor) -> torch.Tensor:
        """All ranks' flags (float, one per rank), reduced but not yet read on the host.

        Returns a 1-element tensor holding `local_flag` when agreement is off.
        """
        return self.rows(local_flag.reshape(1))[:, 0]

    def rows(self, local: torch.Tensor) -> torch.Tensor:
        """Every rank's `local` values (1-d, as long on every rank), one row per rank, in
        float32 and not yet read on the host: each rank fills its own row of zeros and one
        ``all_reduce(SUM)`` gives all of them to everyone (x + 0 is x, NaN and Inf included).

        Returns `local` as the only row when agreement is off.
        """
        row = local.reshape(1, -1).to(torch.float32)
        if not self.active():
            return row
        rank, size = self.rank_and_size()
        device = self._device(row.device)
        table = torch.zeros(size, row.shape[1], dtype=torch.float32, device=device)
        table[rank] = row.to(device)[0]
        _dist().all_reduce(table, op=_dist().ReduceOp.SUM, group=self.group)
        return table.to(local.device)
