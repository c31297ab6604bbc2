"""``nanguard run``: run a whole program under the detector of each framework it uses.

Framework-free: `runner` executes the program as ``python`` would (argv, ``sys.path[0]``,
``-m``, exit statuses, JSON, the printed report); `backends` picks the detectors, one per
framework the program imports (PyTorch, TensorFlow, JAX), looked up by name as
``nanguard.<fw>.detector.detect(check=..., mode="raise", exhaustive=...)``; `ranks` writes
one report per rank of a torchrun job and merges them (which rank went non-finite first);
`cli` is the argument parser.
"""
