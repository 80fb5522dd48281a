"""``python -m s2sad``: the same command line as the ``s2sad`` script."""

import sys

from s2sad.cli import main

sys.exit(main())
