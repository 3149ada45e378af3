"""``python -m posembed.cli``: the ``posembed`` command."""

import sys

from posembed.cli import main

sys.exit(main())
