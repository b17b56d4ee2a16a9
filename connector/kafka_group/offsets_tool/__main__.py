"""``python -m kafka_group.offsets_tool``: the offsets tool (:func:`kafka_group.offsets_tool.command.main`)."""

import sys

from kafka_group.offsets_tool.command import main

if __name__ == "__main__":
    sys.exit(main())
