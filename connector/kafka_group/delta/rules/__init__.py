"""What a Delta table asks of a writer: its schema, column mapping, NOT NULL columns, rules and properties.

Owns the rules a batch must meet before its files may land, each read from the table's schema or
configuration and mostly pure: whether a batch's columns fit and the schema after ``merge_schema``
(:mod:`.schema_evolution`), the physical names of a column-mapped table (:mod:`.column_mapping`), the
columns declared NOT NULL and the NULLs data holds there (:mod:`.not_null`), CHECK constraints, generated
columns and invariants (:mod:`.table_rules`), the mapping and rules a batch was written for, checked again
at the commit (:mod:`.write_contract`), and the properties that change how files are written
(:mod:`.table_properties`).

Layer: ``storage < rules < files < log < offsets < keyed``; it may import :mod:`kafka_group.delta.storage`
(today it needs nothing of it), never a higher subpackage; of ``kafka_group`` only the shared bases at its
top (errors).
"""
