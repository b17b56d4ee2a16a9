"""Schema Registry: registry-framed records (Confluent's wire format) decoded into Arrow columns.

The registry client and its cache, the codecs (Avro, Protobuf, JSON Schema) and the framing live
here; the readers call them on executors. Nothing here imports pyspark.
"""
