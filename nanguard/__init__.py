"""nanguard: NaN and Inf in autodiff programs, solved.

Five pillars: prevent (safe ops), detect & locate, explain, recover (guard the step), lint.
"""

from nanguard.ops import *  # noqa: F401,F403  (prevent: the safe ops)
from nanguard.ops import __all__ as _ops_all

__version__ = "0.1.0"

__all__ = list(_ops_all)
# pillar exports, one block each (detect, guard) follow:
