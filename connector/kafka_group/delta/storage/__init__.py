"""Where a Delta table lives: its location, its object store, its name in a catalog.

Owns a table's location and its spellings, its file system and data folder (:mod:`.table_location`),
catalog names and what they resolve to (:mod:`.table_names`, :mod:`.unity_catalog`: the location and
temporary credentials through Unity Catalog's REST API), and the proof that an object store refuses a
second create of one Delta version (:mod:`.conditional_put`, with its S3 requests in :mod:`.s3_request`).

Layer: the lowest of :mod:`kafka_group.delta` (``storage < rules < files < log < offsets < keyed``). It
imports no other subpackage of ``delta``; of ``kafka_group`` only the shared bases at its top (errors,
JSON text, redaction, bounded HTTP).
"""
