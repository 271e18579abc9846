"""`python -m dlbn ...` is the `dlbn` command."""

import sys

from dlbn.cli import main

sys.exit(main())
