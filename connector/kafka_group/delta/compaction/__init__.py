"""The sink's compaction of small files: which files and bins (:mod:`.bins`, pure), the rewrite and commit of a
bin where delta-rs cannot do it (:mod:`.rewrite`), and the run after a batch's commit (:mod:`.auto_compact`).

Layer: the top of ``kafka_group.delta`` (it reads files as the keyed MERGE does and commits as the log does).
"""
