"""The option catalog at its documented path: ``python -m kafka_group.option_catalog``.

The declarations live in :mod:`kafka_group.config.option_catalog`; this module keeps the
path the README's option table names (``python -m kafka_group.option_catalog --write
README.md``) and the names code most often takes from the catalog.
"""

from kafka_group.config.option_catalog import OPTIONS, OptionSpec, main, readme_table_block, render_markdown_table

__all__ = ["OPTIONS", "OptionSpec", "main", "readme_table_block", "render_markdown_table"]

if __name__ == "__main__":
    raise SystemExit(main())
