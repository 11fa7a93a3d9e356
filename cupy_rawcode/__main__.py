"""``python -m cupy_rawcode``: the ``cupy-rawcode`` command (cli.main), as the script runs it.
Never imported by the package itself: only ``-m`` runs it."""

import sys

from .cli import main

sys.exit(main())
