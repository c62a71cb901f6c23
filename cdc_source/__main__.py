"""``python -m cdc_source quickstart|inspect ...``"""

import sys

from cdc_source.cli import main

sys.exit(main())
