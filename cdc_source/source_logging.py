"""Where the source's log lines go. The source logs from Spark's Python processes, which
inherit the environment of the program that started Spark: the two variables here are
read there."""

from __future__ import annotations

import logging
import os

log = logging.getLogger("cdc_mysql")
# The source's log level (INFO by default).
LOG_LEVEL_ENV = "CDC_MYSQL_LOG_LEVEL"
# A directory for the driver's ``coordinator.log`` and its holdings
# (``coordinator-<pid>.json``, :mod:`coordinator.plan_log`).
STATE_DIR_ENV = "CDC_MYSQL_STATE_DIR"


def configure_logging(driver: bool) -> None:
    """Log lines to stderr (Spark's driver log, or the executor's for a task's retries) as
    ``time LEVEL cdc_mysql: message``; on the driver with ``CDC_MYSQL_STATE_DIR`` set
    also to ``coordinator.log`` there. Once per process."""
    if log.handlers:
        return
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    state_dir = os.environ.get(STATE_DIR_ENV) if driver else None
    if state_dir:
        handlers.append(logging.FileHandler(os.path.join(state_dir, "coordinator.log")))
    for handler in handlers:
        handler.setFormatter(formatter)
        log.addHandler(handler)
    log.setLevel(os.environ.get(LOG_LEVEL_ENV, "INFO").upper())
    log.propagate = False
