"""``python -m consumer.cli``: the ``idempotent-consumer`` command, for an environment without its script."""

import sys

from consumer.cli import main

sys.exit(main())
