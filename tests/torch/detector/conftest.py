"""Shared fixtures: every detection test must leave torch exactly as it found it."""

from __future__ import annotations

import pytest
import torch

from nanguard.torch.detector._state import STATE


@pytest.fixture(autouse=True)
def _clean_detection_state():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # the machine is shared; one thread keeps timings honest
    yield
    torch.set_num_threads(threads)
    assert STATE.stack == [], "a detection was left active"
    assert STATE.depth == 0 and STATE.replay is None and STATE.in_backward == 0
    assert torch._C._len_torch_dispatch_stack() == 0, "a dispatch mode was left on the stack"
    assert not torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.Python), \
        "the Python dispatch key was left on"
