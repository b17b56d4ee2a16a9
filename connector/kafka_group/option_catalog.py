"""The option catalog at its documented path: ``python -m kafka_group.option_catalog``.

The declarations live in :mod:`kafka_group.config.option_catalog`; the options page of the
docs is rendered by :mod:`kafka_group.config.option_docs`, which this module runs
(``python -m kafka_group.option_catalog --write docs/options.md``). It also keeps the
names code most often takes from the catalog.
"""

from kafka_group.config.option_catalog import OPTIONS, OptionSpec, readme_table_block, render_markdown_table
from kafka_group.config.option_docs import main

__all__ = ["OPTIONS", "OptionSpec", "main", "readme_table_block", "render_markdown_table"]

if __name__ == "__main__":
    raise SystemExit(main())
