"""``python -m cdc_source.inspect CHECKPOINT``: the same as ``cdc-mysql inspect``."""

import sys

from cdc_source.inspect.cli import main

sys.exit(main())
