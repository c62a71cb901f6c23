import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hypothesis import settings  # noqa: E402

# No timing thresholds in tests: hypothesis' per-example deadline fails a correct example
# on a loaded machine (CI runs the suite beside servers and Spark).
settings.register_profile("cdc-mysql", deadline=None)
settings.load_profile("cdc-mysql")
