"""The sink's compaction of small files: which files and bins (`.bins`, pure), the rewrite and put-if-absent
commit of a bin (`.rewrite`), and the run after a batch's commit (`.auto_compact`).

Layer: the top of ``kafka_group.delta`` (it reads files as the keyed MERGE does and commits as the log does).
"""
