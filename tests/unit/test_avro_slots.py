"""Avro items that fill many Arrow slots in few bytes (avrobound review): each payload's items are
charged the slots they fill (the leaf count of their type), against a base plus a factor per byte.

A null of a 1,000-field record inside an array is 1 byte but a slot in each of its fields: 20,004
bytes of them were 152 MiB in the Python codec and 154 MiB in Rust. Shown by the bound's verdict,
never by measuring memory.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

fastavro = pytest.importorskip("fastavro")

from kafka_group.registry.avro_bounds import SLOTS_BASE, SLOTS_PER_BYTE, bounds_for  # noqa: E402
from kafka_group.registry.avro_codec import AvroCodec  # noqa: E402
from kafka_group.registry.avro_names import canonical  # noqa: E402
from tests.unit.test_avro_hostile import encode, registered, zigzag  # noqa: E402
from kafka_group.registry.framing import frame  # noqa: E402
from tests.unit.test_avro_native_parity import RICH, V1, both, errors_of  # noqa: E402


def wide(fields: int, name: str = "W") -> Dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": f"f{i}", "type": "int"} for i in range(fields)]}


def of_nulls(fields: int, container: str = "array") -> Dict[str, Any]:
    items = ["null", wide(fields)]
    kind = {"type": "array", "items": items} if container == "array" else {"type": "map", "values": items}
    return {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "xs", "type": kind}]}


def test_twenty_thousand_nulls_of_a_thousand_field_record_are_a_bad_record_naming_the_bound() -> None:
    doc = of_nulls(1_000)
    hostile = zigzag(1) + zigzag(20_000) + b"\x00" * 20_000 + zigzag(0)
    column = AvroCodec().decode(registered(doc), registered(doc), [hostile, encode(doc, {"id": 2, "xs": [None] * 3})])
    assert column.values.to_pylist() == [None, {"id": 2, "xs": [None] * 3}]
    error = column.errors[0] or ""
    assert "Arrow slots" in error
    assert f"{SLOTS_BASE:,}" in error and ".xs" in error and column.errors[1] is None


def test_map_values_are_charged_their_slots_and_their_key() -> None:
    doc = of_nulls(100, "map")
    entries = 2_000
    hostile = zigzag(1) + zigzag(entries) + b"".join(zigzag(len(f"{k}")) + f"{k}".encode() + b"\x00"
                                                     for k in range(entries)) + zigzag(0)
    column = AvroCodec().decode(registered(doc), registered(doc), [hostile])
    assert column.values.to_pylist() == [None] and "Arrow slots" in (column.errors[0] or "")


def test_a_payload_at_the_budget_decodes_and_one_item_more_is_refused() -> None:
    doc = of_nulls(200)  # 201 slots per null, 1 byte each
    sized = {k: zigzag(1) + zigzag(k) + b"\x00" * k + zigzag(0) for k in range(1, 2_000)}
    n = max(k for k, p in sized.items() if k * 201 <= SLOTS_BASE + SLOTS_PER_BYTE * len(p))
    payloads = [sized[n], sized[n + 1]]
    column = AvroCodec().decode(registered(doc), registered(doc), payloads)
    assert column.errors[0] is None and column.values.to_pylist()[0] == {"id": 1, "xs": [None] * n}
    assert "Arrow slots" in (column.errors[1] or "")


@pytest.mark.parametrize("doc", [V1, RICH, of_nulls(SLOTS_PER_BYTE - 1), wide(500),
                                 {"type": "array", "items": wide(4)}, {"type": "map", "values": ["null", "long"]}])
def test_ordinary_writers_are_not_walked_for_their_slots(doc: Any) -> None:
    """Items filling at most SLOTS_PER_BYTE slots per byte they take can never exceed the budget."""
    bounds = bounds_for(canonical(doc))
    assert bounds is None or bounds.decimals_only


def test_a_writer_of_nullable_wide_items_is_walked_and_still_read_by_the_compiled_decoder() -> None:
    doc = of_nulls(SLOTS_PER_BYTE)  # SLOTS_PER_BYTE + 1 slots in 1 byte
    bounds = bounds_for(canonical(doc))
    assert bounds is not None and bounds.native
    assert AvroCodec().native_plan(registered(doc), registered(doc)) is not None
    small: List[bytes] = [encode(doc, {"id": 1, "xs": [None] * 100})]
    assert bounds.check(small[0]) is None


@pytest.mark.parametrize("container", ["array", "map"])
def test_rust_decodes_a_payload_at_the_budget_and_hands_back_one_item_more(container: str) -> None:
    doc = of_nulls(200, container)  # 201 slots per null, 1 byte (a map entry: 202 slots, its key's bytes more)

    def payload(n: int) -> bytes:
        items = b"\x00" * n if container == "array" else b"".join(
            zigzag(len(str(k))) + str(k).encode() + b"\x00" for k in range(n))
        return zigzag(1) + zigzag(n) + items + zigzag(0)

    per = 201 if container == "array" else 202
    n = max(k for k in range(1, 5_000) if k * per <= SLOTS_BASE + SLOTS_PER_BYTE * len(payload(k)))
    batch, decoded_here = both(doc, {1: doc}, [frame(1, payload(n)), frame(1, payload(n + 1))])
    errors = errors_of(batch)
    assert decoded_here == 1 and errors[0] is None and "Arrow slots" in (errors[1] or "")
    assert len(batch.column("value").to_pylist()[0]["xs"]) == n


def of_enums(symbol_bytes: int) -> Dict[str, Any]:
    """An array of an enum whose first symbol is ``symbol_bytes`` long: each 1-byte item is that many bytes of Arrow."""
    kind = {"type": "enum", "name": "E", "symbols": ["S" * symbol_bytes, "T"]}
    return {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"},
                                                      {"name": "xs", "type": {"type": "array", "items": kind}}]}


def enum_items(n: int) -> bytes:
    return zigzag(1) + zigzag(n) + zigzag(0) * n + zigzag(0)  # n items of the long symbol, 1 byte each


def test_an_enum_item_is_charged_the_slots_of_its_longest_symbol() -> None:
    """A 1-byte enum item copies its symbol into the column: an array of them is as dense as its longest symbol
    (800 bytes: 100 slots of 8 bytes), so 5,000 of them (4 MB of Arrow from 5 KB) are beyond the budget."""
    doc = of_enums(800)
    bounds = bounds_for(canonical(doc))
    assert bounds is not None and not bounds.decimals_only
    column = AvroCodec().decode(registered(doc), registered(doc), [enum_items(5_000), enum_items(3)])
    assert column.values.to_pylist() == [None, {"id": 1, "xs": ["S" * 800] * 3}]
    assert "Arrow slots" in (column.errors[0] or "") and column.errors[1] is None


def test_rust_charges_an_enum_item_its_longest_symbol_and_hands_back_one_item_more() -> None:
    doc = of_enums(800)  # 100 slots an item
    n = max(k for k in range(1, 5_000) if k * 100 <= SLOTS_BASE + SLOTS_PER_BYTE * len(enum_items(k)))
    batch, decoded_here = both(doc, {1: doc}, [frame(1, enum_items(n)), frame(1, enum_items(n + 1))])
    errors = errors_of(batch)
    assert decoded_here == 1 and errors[0] is None and "Arrow slots" in (errors[1] or "")
    assert len(batch.column("value").to_pylist()[0]["xs"]) == n
