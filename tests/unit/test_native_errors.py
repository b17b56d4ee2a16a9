"""The extension's problems become the connector's errors, worded with the option that helps.

A Rust panic reached Python as pyo3's ``PanicException``, a ``BaseException`` that ``except Exception``
lets through: the extension now raises ``InternalProblem(call, detail)``, which the read path turns
into :class:`~kafka_group.errors.FetchError` (``tests/integration/test_header_bytes_and_native_panics.py``
makes one really happen). A record no Arrow batch can hold is refused as ``RecordProblem("too_large", ...)``.
"""

from __future__ import annotations

from kafka_group.errors import FetchError, KafkaGroupError, RecordError
from kafka_group.read.native_client import internal_error, record_error


def test_a_panic_is_a_fetch_error_naming_the_call_the_detail_and_the_read_path_option() -> None:
    error = internal_error(("fill", "byte array offset overflow"))
    assert isinstance(error, FetchError) and isinstance(error, KafkaGroupError)
    assert "'fill'" in str(error) and "byte array offset overflow" in str(error)
    assert "'read.path' to 'python'" in str(error)


def test_a_record_too_large_for_a_batch_is_a_record_error_naming_it_and_the_fixes() -> None:
    error = record_error(("too_large", "t", 3, 42, (3 << 30, 1)))
    assert isinstance(error, RecordError)
    assert "t-3 at offset 42" in str(error) and str(3 << 30) in str(error)
    assert "'includeHeaders'" in str(error) and "past this offset" in str(error)
