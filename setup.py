"""Packaging for pyspark-kafka-group.

Two packages ship: ``pyspark_kafka_group`` (the Spark glue; its ``pyspark_``
prefix lets Spark register the ``kafka-group`` format by itself) and
``kafka_group`` (the Spark-independent core). ``pyspark_kafka_group`` sits under
a plain source root (``python/``, where ``kafka_group`` is a link to
``connector/kafka_group``) so that ``pkgutil.iter_modules`` sees it in
editable installs too; Spark's data source lookup depends on that.
"""

from setuptools import setup

setup(
    name="pyspark-kafka-group",
    version="0.1.0",
    description="Kafka into Spark Structured Streaming as a real consumer-group member, exactly once into Delta Lake",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # python/kafka_group is a symbolic link to connector/kafka_group: one plain source root.
    package_dir={"": "python"},
    packages=["pyspark_kafka_group", "kafka_group", "kafka_group.embedded"],
    # pyspark_kafka_group/jvm_shim links to jvm-shim/src: the Java sources ship, so the
    # optional metrics shim can be compiled on first use after a regular install.
    package_data={"kafka_group": ["py.typed"], "pyspark_kafka_group": ["py.typed", "jvm_shim/**/*.java"]},
    install_requires=[
        "pyspark>=4.2",
        "confluent-kafka>=2.12",
        "pyarrow>=15",
        "deltalake>=1.0",
    ],
    extras_require={
        "test": ["pytest>=8", "mypy>=1.10", "pandas>=2,<3", "polars>=1",
                 # the test environment pins the Spark that delta-spark supports; delta-spark 4.4.0 because
                 # Maven Central has no Spark 4.2 jar of 4.4.1 (io.delta:delta-spark_4.2_2.13)
                 "pyspark==4.2.0", "delta-spark==4.4.0",
                 "nbclient", "nbformat", "ipykernel", "matplotlib"],
        "plot": ["matplotlib"],
    },
    entry_points={
        "console_scripts": [
            "kafka-group-broker=kafka_group.embedded.__main__:main",
        ]
    },
)
