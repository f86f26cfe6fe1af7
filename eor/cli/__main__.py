"""`python -m eor.cli ...` is `eor ...`."""

import sys

from eor.cli import main

sys.exit(main())
