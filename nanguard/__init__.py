"""nanguard: NaN and Inf in autodiff programs, solved.

Five pillars: prevent (safe ops), detect & locate, explain, recover (guard the step), lint.
"""

from nanguard.ops import *  # noqa: F401,F403  (prevent: the safe ops)
from nanguard.ops import __all__ as _ops_all
from nanguard.errors import NonFiniteError

__version__ = "0.1.0"

__all__ = list(_ops_all) + ["NonFiniteError"]
# pillar exports, one block each (detect, guard) follow:
