"""The option catalog at its documented path: ``python -m kafka_group.option_catalog``.

The declarations live in :mod:`kafka_group.config.option_catalog`; this module keeps the
path the README's option table names (``python -m kafka_group.option_catalog --write
README.md``) and re-exports the catalog's public names for code that imports them from here.
"""

from kafka_group.config.option_catalog import (
    OPTIONS,
    README_TABLE_BEGIN,
    README_TABLE_END,
    OptionSpec,
    Parser,
    boolean,
    default_control_dir,
    main,
    one_of,
    parse_duration_ms,
    positive_int,
    readme_table_block,
    render_markdown_table,
)

__all__ = [
    "OptionSpec",
    "OPTIONS",
    "Parser",
    "render_markdown_table",
    "readme_table_block",
    "README_TABLE_BEGIN",
    "README_TABLE_END",
    "boolean",
    "positive_int",
    "one_of",
    "parse_duration_ms",
    "default_control_dir",
    "main",
]

if __name__ == "__main__":
    raise SystemExit(main())
