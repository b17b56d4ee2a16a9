//! Registry-framed Avro payloads decoded into one Arrow column, driven by a plan made in Python.
//!
//! The Python codec (`kafka_group.registry.avro_codec`) stays the reference: `kafka_group.registry.
//! avro_native` builds a plan (a table of schema nodes) only for the writer and reader schemas it
//! knows this decoder reads exactly, and this module decodes a payload only when every value in it
//! is one the reference decodes to the same Arrow value. Anything else — a payload that ends early
//! or late, an out-of-range union branch or enum index, invalid UTF-8, a number wider than its
//! type, a decimal beyond its precision, a duplicate map key, a count larger than the bytes
//! left — makes that record a *fallback*: its partial values are truncated away, it is a null here,
//! and Python decodes it with the reference codec (its value or its error, exactly as today).
//!
//! Bounds: nothing is allocated from a count in a payload (a count above the bytes left is a
//! fallback; each item of an array or map takes at least one byte, which the plan guarantees), and
//! the recursion is the plan's depth, which is a non-recursive schema's (at most [`crate::avro_plan::MAX_DEPTH`]).
//! The Arrow slots a payload's array and map items fill are charged before they are read, each item
//! the leaf count of its type (a map entry one more for its key), against the budget Python's
//! `avro_bounds` gives (`SLOTS_BASE` plus `SLOTS_PER_BYTE` per payload byte): a record beyond it is
//! handed back (Python's walk then makes it a bad record), so no column grows past it for a record.

use std::collections::HashSet;

use arrow_array::{Array, BinaryArray, PrimitiveArray};
use arrow_array::types::Int32Type;
use arrow_data::ArrayData;
use arrow_pyarrow::{PyArrowType, ToPyArrow};
use arrow_schema::DataType;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::avro_column::{new_column, slots_of, Col, Column};
use crate::avro_plan::{parse_plan, Kind, Node, PlanNode};

/// A payload being read; every failure is `Err(())`: the record goes to the reference decoder.
struct Payload<'a> {
    data: &'a [u8],
    pos: usize,
    /// The Arrow slots its items may still fill.
    slots_left: u64,
}

type Step = Result<(), ()>;

impl<'a> Payload<'a> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ()> {
        if n > self.left() {
            return Err(());
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// A zigzag varint of at most 64 bits (a longer one is wider than any Arrow integer here).
    fn long(&mut self) -> Result<i64, ()> {
        let mut result: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = *self.data.get(self.pos).ok_or(())?;
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(());
            }
            result |= u64::from(byte & 0x7F) << shift;
            if byte < 0x80 {
                return Ok((result >> 1) as i64 ^ -((result & 1) as i64));
            }
            shift += 7;
            if shift > 63 {
                return Err(());
            }
        }
    }

    fn int(&mut self) -> Result<i32, ()> {
        i32::try_from(self.long()?).map_err(|_| ())
    }

    fn length(&mut self) -> Result<usize, ()> {
        let n = self.long()?;
        if n < 0 || n as u64 > self.left() as u64 {
            return Err(());
        }
        Ok(n as usize)
    }

    /// A block's item count, its items charged `slots` each (a negative count is followed by the
    /// block's size in bytes).
    fn block(&mut self, slots: u64) -> Result<usize, ()> {
        let mut n = self.long()?;
        if n < 0 {
            n = n.checked_neg().ok_or(())?;
            self.long()?;
        }
        // Each item takes at least one byte: a count above the bytes left is corrupt (nothing is
        // allocated from it).
        if n as u64 > self.left() as u64 {
            return Err(());
        }
        let charge = (n as u64).checked_mul(slots).ok_or(())?;
        self.slots_left = self.slots_left.checked_sub(charge).ok_or(())?;
        Ok(n as usize)
    }
}

fn push_bytes(off: &mut Vec<i32>, data: &mut Vec<u8>, value: &[u8]) -> Step {
    data.extend_from_slice(value);
    off.push(i32::try_from(data.len()).map_err(|_| ())?);
    Ok(())
}

fn decode(nodes: &[Node], slots: &[u64], index: usize, p: &mut Payload<'_>, out: &mut Column) -> Step {
    let node = &nodes[index];
    if let Kind::Nullable(null_branch) = node.kind {
        let branch = p.long()?;
        if branch == null_branch {
            out.push_null();
            return Ok(());
        }
        if branch != 1 - null_branch {
            return Err(());
        }
        return decode(nodes, slots, node.children[0], p, out);
    }
    match (&node.kind, &mut out.col) {
        (Kind::Bool, Col::Bool(v)) => v.push(p.take(1)?[0] != 0),
        (Kind::Int, Col::I32(v, _)) | (Kind::Date, Col::I32(v, _)) => v.push(p.int()?),
        (Kind::Long, Col::I64(v, _)) => v.push(p.long()?),
        (Kind::Ts(_, millis), Col::I64(v, _)) => {
            let n = p.long()?;
            v.push(if *millis { n.checked_mul(1000).ok_or(())? } else { n });
        }
        (Kind::Float, Col::F32(v)) => {
            let x = f32::from_le_bytes(p.take(4)?.try_into().map_err(|_| ())?);
            if x.is_nan() {
                return Err(()); // NaN payload bits: left to the reference's own round trip
            }
            v.push(x);
        }
        (Kind::Double, Col::F64(v)) => v.push(f64::from_le_bytes(p.take(8)?.try_into().map_err(|_| ())?)),
        (Kind::Str, Col::Bytes(off, data, _)) => {
            let n = p.length()?;
            let s = p.take(n)?;
            std::str::from_utf8(s).map_err(|_| ())?;
            push_bytes(off, data, s)?;
        }
        (Kind::Bytes, Col::Bytes(off, data, _)) => {
            let n = p.length()?;
            push_bytes(off, data, p.take(n)?)?;
        }
        (Kind::Fixed(size), Col::Bytes(off, data, _)) => push_bytes(off, data, p.take(*size)?)?,
        (Kind::Enum, Col::Bytes(off, data, _)) => {
            let i = p.long()?;
            let symbol = usize::try_from(i).ok().and_then(|i| node.names.get(i)).ok_or(())?;
            push_bytes(off, data, symbol.as_bytes())?;
        }
        (Kind::Dec(precision, _, size), Col::Dec(v, _, _)) => {
            let n = if *size > 0 { *size } else { p.length()? };
            let bytes = p.take(n)?;
            v.push(decimal(bytes, *precision)?);
        }
        (Kind::Array, Col::List(off, kid)) => {
            let mut total = kid.len();
            loop {
                let n = p.block(slots[node.children[0]])?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    decode(nodes, slots, node.children[0], p, kid)?;
                }
                total += n;
            }
            off.push(i32::try_from(total).map_err(|_| ())?);
        }
        (Kind::Map, Col::Map(off, keys, values)) => {
            let start = keys.len();
            loop {
                let n = p.block(slots[node.children[0]].saturating_add(1))?;
                if n == 0 {
                    break;
                }
                for _ in 0..n {
                    decode(nodes_key(), &[1], 0, p, keys)?;
                    decode(nodes, slots, node.children[0], p, values)?;
                }
            }
            if let Col::Bytes(koff, kdata, _) = &keys.col {
                let count = keys.len() - start;
                if count > 1 {
                    // A duplicate key: the reference keeps the last value at the first key's place.
                    let mut seen = HashSet::with_capacity(count);
                    for k in start..keys.len() {
                        if !seen.insert(&kdata[koff[k] as usize..koff[k + 1] as usize]) {
                            return Err(());
                        }
                    }
                }
            }
            off.push(i32::try_from(keys.len()).map_err(|_| ())?);
        }
        (Kind::Record, Col::Struct(_, kids)) => {
            for (&child, kid) in node.children.iter().zip(kids.iter_mut()) {
                decode(nodes, slots, child, p, kid)?;
            }
        }
        _ => return Err(()),
    }
    out.valid.push(true);
    Ok(())
}

fn nodes_key() -> &'static [Node] {
    static KEY: std::sync::OnceLock<Vec<Node>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| vec![Node { kind: Kind::Str, children: Vec::new(), names: Vec::new() }])
}

/// A big-endian two's complement decimal that fits its precision (empty bytes are 0, as the reference reads them).
fn decimal(bytes: &[u8], precision: u8) -> Result<i128, ()> {
    if bytes.len() > 16 {
        return Err(());
    }
    let mut value: i128 = if bytes.first().is_some_and(|b| b & 0x80 != 0) { -1 } else { 0 };
    for &b in bytes {
        value = (value << 8) | i128::from(b);
    }
    if value.unsigned_abs() >= 10u128.pow(u32::from(precision)) {
        return Err(());
    }
    Ok(value)
}

/// Each value's schema id (null for a null value and for a value that is not registry-framed:
/// shorter than 5 bytes, or a first byte other than 0). Caller: the Spark task's thread.
#[pyfunction]
pub fn frame_ids<'py>(py: Python<'py>, values: PyArrowType<ArrayData>) -> PyResult<Bound<'py, PyAny>> {
    crate::guarded("frame_ids", || frame_ids_of(py, values))
}

fn frame_ids_of<'py>(py: Python<'py>, values: PyArrowType<ArrayData>) -> PyResult<Bound<'py, PyAny>> {
    let data = values.0;
    if data.data_type() != &DataType::Binary {
        return Err(PyValueError::new_err(format!("a binary column is framed, not {}", data.data_type())));
    }
    let values = BinaryArray::from(data);
    let ids: PrimitiveArray<Int32Type> = values
        .iter()
        .map(|v| v.filter(|v| v.len() >= 5 && v[0] == 0).map(|v| i32::from_be_bytes([v[1], v[2], v[3], v[4]])))
        .collect();
    ids.to_data().to_pyarrow(py)
}

/// Append to `out` the value of each record of `values` whose frame has `schema_id`, in record order
/// (other records are skipped); returns the positions in `out` of the records left to the reference
/// decoder (a null here, their partial values truncated away). `slots`: (base, per payload byte).
fn decode_framed(nodes: &[Node], item_slots: &[u64], values: &BinaryArray, schema_id: i32, slots: (u64, u64),
                 out: &mut Column) -> Vec<usize> {
    let (base, per_byte) = slots;
    let mut fallback = Vec::new();
    out.reserve(values.len());
    let id = schema_id.to_be_bytes();
    for value in values.iter().flatten() {
        if value.len() < 5 || value[0] != 0 || value[1..5] != id {
            continue;
        }
        let before = out.len();
        let size = (value.len() - 5) as u64;
        let budget = base.saturating_add(per_byte.saturating_mul(size));
        let mut payload = Payload { data: &value[5..], pos: 0, slots_left: budget };
        let done = decode(nodes, item_slots, 0, &mut payload, out);
        if done.is_err() || payload.left() != 0 {
            out.truncate(before);
            out.push_null();
            fallback.push(before);
        }
    }
    fallback
}

/// Decode the values of `values` (a binary column of registry-framed records) whose frame has
/// `schema_id`, in record order, through `plan`; returns the column (one value per such record) and
/// the positions in it of the records left to the reference decoder (null here). `slots` is the
/// budget of Arrow slots of one payload's items: (base, per payload byte).
///
/// Caller: the Spark task's thread (an executor); the GIL is released while decoding.
#[pyfunction]
pub fn avro_decode<'py>(
    py: Python<'py>,
    values: PyArrowType<ArrayData>,
    schema_id: i32,
    plan: Vec<PlanNode>,
    slots: (u64, u64),
) -> PyResult<(Bound<'py, PyAny>, Vec<usize>)> {
    crate::guarded("avro_decode", || decode_column(py, values, schema_id, plan, slots))
}

fn decode_column<'py>(
    py: Python<'py>,
    values: PyArrowType<ArrayData>,
    schema_id: i32,
    plan: Vec<PlanNode>,
    slots: (u64, u64),
) -> PyResult<(Bound<'py, PyAny>, Vec<usize>)> {
    let nodes = parse_plan(plan).map_err(PyValueError::new_err)?;
    let item_slots = slots_of(&nodes);
    let mut out = new_column(&nodes, 0, 0).map_err(PyValueError::new_err)?;
    let data = values.0;
    if data.data_type() != &DataType::Binary {
        return Err(PyValueError::new_err(format!("a binary column is decoded, not {}", data.data_type())));
    }
    let values = BinaryArray::from(data);
    // A panic (a bug) becomes a ValueError: the Python codec then decodes these records.
    let done = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let fallback = decode_framed(&nodes, &item_slots, &values, schema_id, slots, &mut out);
            (out.finish().1, fallback)
        }))
    });
    let (array, fallback) = done.map_err(|_| PyValueError::new_err("the compiled Avro decoder failed (a bug)"))?;
    Ok((array.to_data().to_pyarrow(py)?, fallback))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{
        Array, ArrayRef, Decimal128Array, Int32Array, Int64Array, ListArray, MapArray, StringArray, StructArray,
    };

    fn node(kind: &str, a: i64, children: Vec<usize>, names: &[&str]) -> PlanNode {
        (kind.to_string(), a, 0, 0, children, names.iter().map(|n| n.to_string()).collect())
    }

    /// Avro's zigzag varint.
    fn long(n: i64) -> Vec<u8> {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            if z < 0x80 {
                out.push(z as u8);
                return out;
            }
            out.push((z as u8 & 0x7F) | 0x80);
            z >>= 7;
        }
    }

    fn string(text: &[u8]) -> Vec<u8> {
        [long(text.len() as i64), text.to_vec()].concat()
    }

    /// `payload` framed with schema id `id` (magic byte 0, the id big-endian).
    fn framed(id: i32, payload: &[u8]) -> Vec<u8> {
        [vec![0], id.to_be_bytes().to_vec(), payload.to_vec()].concat()
    }

    /// The column and fallback positions of `values` decoded through `plan` for schema id 7.
    fn run(plan: Vec<PlanNode>, values: &[Option<Vec<u8>>], slots: (u64, u64)) -> (ArrayRef, Vec<usize>) {
        let nodes = parse_plan(plan).expect("a plan this decoder reads");
        let mut out = new_column(&nodes, 0, 0).expect("its column");
        let array = BinaryArray::from_iter(values.iter().map(|v| v.as_deref()));
        let fallback = decode_framed(&nodes, &slots_of(&nodes), &array, 7, slots, &mut out);
        (out.finish().1, fallback)
    }

    /// record {a: int, s: string, n: [null, long], tags: array<string>}
    fn record_plan() -> Vec<PlanNode> {
        vec![
            node("record", 0, vec![1, 2, 3, 5], &["a", "s", "n", "tags"]),
            node("int", 0, vec![], &[]),
            node("string", 0, vec![], &[]),
            node("nullable", 0, vec![4], &[]),
            node("long", 0, vec![], &[]),
            node("array", 0, vec![6], &[]),
            node("string", 0, vec![], &[]),
        ]
    }

    fn record_payload(a: i64, s: &[u8], n: Option<i64>, tags: &[&[u8]]) -> Vec<u8> {
        let mut out = [long(a), string(s)].concat();
        match n {
            None => out.extend(long(0)),
            Some(n) => out.extend([long(1), long(n)].concat()),
        }
        if !tags.is_empty() {
            out.extend(long(tags.len() as i64));
            tags.iter().for_each(|t| out.extend(string(t)));
        }
        out.extend(long(0));
        out
    }

    fn fields(array: &ArrayRef) -> &StructArray {
        array.as_any().downcast_ref::<StructArray>().expect("a struct column")
    }

    #[test]
    fn records_of_the_schema_id_decode_in_order_and_others_are_skipped() {
        let values = vec![
            Some(framed(7, &record_payload(-3, "hé".as_bytes(), Some(i64::MIN), &[b"x", b""]))),
            Some(framed(8, &record_payload(1, b"other id", None, &[]))), // another schema: not this column's
            None,
            Some(vec![0, 0, 0]),                                          // not framed
            Some(framed(7, &record_payload(i64::from(i32::MAX), b"", None, &[]))),
        ];
        let (array, fallback) = run(record_plan(), &values, (1000, 10));
        assert!(fallback.is_empty());
        let record = fields(&array);
        assert_eq!(record.len(), 2);
        let a = record.column(0).as_any().downcast_ref::<Int32Array>().expect("a");
        assert_eq!(a.values().to_vec(), vec![-3, i32::MAX]);
        let s = record.column(1).as_any().downcast_ref::<StringArray>().expect("s");
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![Some("hé"), Some("")]);
        let n = record.column(2).as_any().downcast_ref::<Int64Array>().expect("n");
        assert_eq!(n.iter().collect::<Vec<_>>(), vec![Some(i64::MIN), None]);
        let tags = record.column(3).as_any().downcast_ref::<ListArray>().expect("tags");
        assert_eq!(tags.value_length(0), 2);
        assert_eq!(tags.value_length(1), 0);
    }

    #[test]
    fn a_payload_the_decoder_cannot_read_exactly_is_left_to_the_reference_and_leaves_nothing_behind() {
        let good = record_payload(5, b"ok", Some(1), &[b"t1", b"t2"]);
        let mut late = good.clone();
        late.push(0); // ends late
        let early = &good[..good.len() - 2]; // ends early, inside the list
        let bad_utf8 = record_payload(5, b"\xff", None, &[]);
        let bad_branch = [long(1), string(b"s"), long(2), long(0)].concat(); // union index 2 of [null, long]
        let wide_int = record_payload(i64::from(i32::MAX) + 1, b"", None, &[]);
        let values: Vec<Option<Vec<u8>>> = [&good[..], &late, early, &bad_utf8, &bad_branch, &wide_int, &good]
            .iter()
            .map(|p| Some(framed(7, p)))
            .collect();
        let (array, fallback) = run(record_plan(), &values, (1000, 10));
        assert_eq!(fallback, vec![1, 2, 3, 4, 5]);
        let record = fields(&array);
        assert_eq!(record.len(), 7);
        assert_eq!((0..7).map(|i| record.is_valid(i)).collect::<Vec<_>>(), vec![true, false, false, false, false, false, true]);
        // The fallbacks' partial list items were truncated away: the last record's items follow the first's.
        let tags = record.column(3).as_any().downcast_ref::<ListArray>().expect("tags");
        let items = tags.values().as_any().downcast_ref::<StringArray>().expect("items").iter().collect::<Vec<_>>();
        assert_eq!(items, vec![Some("t1"), Some("t2"), Some("t1"), Some("t2")]);
        assert_eq!(tags.value_length(6), 2);
    }

    #[test]
    fn counts_beyond_the_payload_or_the_slot_budget_are_refused_before_anything_is_allocated() {
        let plan = vec![node("array", 0, vec![1], &[]), node("long", 0, vec![], &[])];
        let huge_count = [long(i64::MAX / 2), long(1)].concat();
        let negative_count = [long(i64::MIN), long(0)].concat(); // its negation overflows
        let ten = [long(10), vec![2; 10], long(0)].concat();
        let values = vec![Some(framed(7, &huge_count)), Some(framed(7, &negative_count)), Some(framed(7, &ten))];
        let (_, fallback) = run(plan.clone(), &values, (1000, 0));
        assert_eq!(fallback, vec![0, 1]);
        // Ten items under a budget of nine slots: handed back; under ten: decoded.
        assert_eq!(run(plan.clone(), &[Some(framed(7, &ten))], (9, 0)).1, vec![0]);
        let (array, fallback) = run(plan, &[Some(framed(7, &ten))], (10, 0));
        assert!(fallback.is_empty());
        let list = array.as_any().downcast_ref::<ListArray>().expect("list");
        assert_eq!(list.value_length(0), 10);
    }

    #[test]
    fn a_varint_wider_than_64_bits_is_refused() {
        let plan = vec![node("long", 0, vec![], &[])];
        let widest = long(i64::MIN); // ten bytes, the last 1
        assert_eq!(widest.len(), 10);
        let mut wider = widest.clone();
        wider[9] = 0x02;
        let eleven = [vec![0x80; 10], vec![0x00]].concat();
        let (array, fallback) = run(plan, &[Some(framed(7, &widest)), Some(framed(7, &wider)), Some(framed(7, &eleven))], (0, 0));
        assert_eq!(fallback, vec![1, 2]);
        assert_eq!(array.as_any().downcast_ref::<Int64Array>().expect("long").value(0), i64::MIN);
    }

    #[test]
    fn decimals_must_fit_their_precision() {
        assert_eq!(decimal(&[0x03, 0xE7], 3), Ok(999));
        assert_eq!(decimal(&[0x03, 0xE8], 3), Err(()));
        assert_eq!(decimal(&[0x03, 0xE8], 4), Ok(1000));
        assert_eq!(decimal(&[0xFC, 0x19], 3), Ok(-999));
        assert_eq!(decimal(&[], 1), Ok(0));
        assert_eq!(decimal(&[0xFF; 17], 38), Err(()));
        let plan = vec![("decimal".to_string(), 4, 2, 0, vec![], vec![])];
        let (array, fallback) = run(plan, &[Some(framed(7, &[long(2), vec![0x03, 0xE8]].concat()))], (0, 0));
        assert!(fallback.is_empty());
        let column = array.as_any().downcast_ref::<Decimal128Array>().expect("decimal");
        assert_eq!((column.value(0), column.precision(), column.scale()), (1000, 4, 2));
    }

    #[test]
    fn an_enum_index_outside_its_symbols_and_a_duplicate_map_key_are_left_to_the_reference() {
        let enum_plan = vec![node("enum", 0, vec![], &["A", "B"])];
        let (array, fallback) = run(enum_plan, &[Some(framed(7, &long(1))), Some(framed(7, &long(2))), Some(framed(7, &long(-1)))], (0, 0));
        assert_eq!(fallback, vec![1, 2]);
        assert_eq!(array.as_any().downcast_ref::<StringArray>().expect("enum").value(0), "B");
        let map_plan = vec![node("map", 0, vec![1], &[]), node("int", 0, vec![], &[])];
        let entry = |key: &[u8], value: i64| [string(key), long(value)].concat();
        let unique = [long(2), entry(b"a", 1), entry(b"b", 2), long(0)].concat();
        let duplicate = [long(2), entry(b"a", 1), entry(b"a", 2), long(0)].concat();
        let (array, fallback) = run(map_plan, &[Some(framed(7, &unique)), Some(framed(7, &duplicate))], (100, 0));
        assert_eq!(fallback, vec![1]);
        let map = array.as_any().downcast_ref::<MapArray>().expect("map");
        assert_eq!(map.value_length(0), 2);
        assert_eq!(map.value_length(1), 0);
    }

    #[test]
    fn plans_this_decoder_does_not_read_are_refused() {
        assert!(parse_plan(vec![]).is_err());
        assert!(parse_plan(vec![node("union", 0, vec![], &[])]).is_err());
        assert!(parse_plan(vec![node("array", 0, vec![5], &[])]).is_err()); // a child past the plan
        assert!(parse_plan(vec![node("array", 0, vec![], &[])]).is_err()); // an array of nothing
        assert!(parse_plan(vec![node("fixed", 0, vec![], &[])]).is_err());
        assert!(parse_plan(vec![("decimal".to_string(), 39, 0, 0, vec![], vec![])]).is_err());
        assert!(parse_plan(vec![node("nullable", 2, vec![0], &[])]).is_err());
    }
}
