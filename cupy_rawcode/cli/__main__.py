"""``python -m cupy_rawcode.cli``: the ``cupy-rawcode`` command."""

import sys

from . import main

sys.exit(main())
