"""`python -m nanguard.lint PATH...` is `nanguard lint PATH...`."""

import sys

from nanguard.lint.cli import main

sys.exit(main())
