"""The version of pyspark-kafka-group, in one place.

``setup.py`` reads it from this file (a build cannot import the package); ``kafka_group.__version__`` and
``pyspark_kafka_group.__version__`` are this value at run time. The files that cannot read it (the Rust
crate's ``native/Cargo.toml``, the metrics shim's ``jvm-shim/pom.xml``, the development brokers'
``devbroker/pyproject.toml``) repeat it, and ``tests/unit/test_versions.py`` keeps them equal.
What a version number promises: docs/versioning.md; what each release changed: CHANGELOG.md.
"""

__version__ = "0.2.0"
