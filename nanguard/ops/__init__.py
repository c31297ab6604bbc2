"""Prevent: numerically safe ops with finite values and gradients, one family per module."""

__all__: list[str] = []
