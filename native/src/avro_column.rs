//! The Arrow column the compiled Avro decoder ([`crate::avro`]) fills: one builder per node of a
//! plan, in exactly the Arrow types `kafka_group.registry.avro_types` gives (struct fields, list
//! items and map values nullable; map entries "entries" of "key" and "value"). A record handed
//! back to the Python codec is truncated away ([`Column::truncate`]) and replaced by a null.

use std::sync::Arc;

use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, GenericBinaryType, GenericStringType, Int32Type, Int64Type,
    TimestampMicrosecondType,
};
use arrow_array::{Array, ArrayRef, BooleanArray, Decimal128Array, GenericByteArray, ListArray, MapArray, PrimitiveArray, StructArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields};

use crate::avro_plan::{Kind, Node, MAX_DEPTH};

/// One column being built, with its validity (one entry per value).
pub struct Column {
    pub col: Col,
    pub valid: Vec<bool>,
}

pub enum Col {
    Bool(Vec<bool>),
    /// values, is date32
    I32(Vec<i32>, bool),
    /// values, None: int64, Some(utc): timestamp[us]
    I64(Vec<i64>, Option<bool>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Dec(Vec<i128>, u8, i8),
    /// offsets, data, is UTF-8
    Bytes(Vec<i32>, Vec<u8>, bool),
    List(Vec<i32>, Box<Column>),
    Map(Vec<i32>, Box<Column>, Box<Column>),
    Struct(Vec<String>, Vec<Column>),
}

fn column(col: Col) -> Column {
    Column { col, valid: Vec::new() }
}

pub fn new_column(nodes: &[Node], index: usize, depth: usize) -> Result<Column, String> {
    if depth > MAX_DEPTH {
        return Err("plan nests too deep".into());
    }
    let node = &nodes[index];
    let col = match node.kind {
        Kind::Nullable(_) => return new_column(nodes, node.children[0], depth + 1),
        Kind::Bool => Col::Bool(Vec::new()),
        Kind::Int => Col::I32(Vec::new(), false),
        Kind::Date => Col::I32(Vec::new(), true),
        Kind::Long => Col::I64(Vec::new(), None),
        Kind::Ts(utc, _) => Col::I64(Vec::new(), Some(utc)),
        Kind::Float => Col::F32(Vec::new()),
        Kind::Double => Col::F64(Vec::new()),
        Kind::Dec(p, s, _) => Col::Dec(Vec::new(), p, s),
        Kind::Str | Kind::Enum => Col::Bytes(vec![0], Vec::new(), true),
        Kind::Bytes | Kind::Fixed(_) => Col::Bytes(vec![0], Vec::new(), false),
        Kind::Array => {
            if min_bytes(nodes, node.children[0], depth + 1) == 0 {
                return Err("array items that take no bytes".into());
            }
            Col::List(vec![0], Box::new(new_column(nodes, node.children[0], depth + 1)?))
        }
        Kind::Map => Col::Map(
            vec![0],
            Box::new(column(Col::Bytes(vec![0], Vec::new(), true))),
            Box::new(new_column(nodes, node.children[0], depth + 1)?),
        ),
        Kind::Record => Col::Struct(
            node.names.clone(),
            node.children.iter().map(|&c| new_column(nodes, c, depth + 1)).collect::<Result<_, _>>()?,
        ),
    };
    Ok(column(col))
}

/// The fewest bytes a value of the node takes (a zero-size fixed, or a record of them, takes none).
fn min_bytes(nodes: &[Node], index: usize, depth: usize) -> usize {
    if depth > MAX_DEPTH {
        return 1;
    }
    let node = &nodes[index];
    match node.kind {
        Kind::Fixed(size) => size,
        Kind::Dec(_, _, size) if size > 0 => size,
        Kind::Record => node.children.iter().map(|&c| min_bytes(nodes, c, depth + 1)).sum(),
        _ => 1,
    }
}

/// The Arrow slots one value of each node fills (as `avro_bounds` counts them: 1, a record's own
/// and its fields', a nullable's value's, an enum's longest symbol's bytes in slots of 8; a list or map is
/// 1, its items charged as they are read).
pub fn slots_of(nodes: &[Node]) -> Vec<u64> {
    fn count(nodes: &[Node], index: usize, depth: usize, memo: &mut Vec<Option<u64>>) -> u64 {
        if let Some(n) = memo[index] {
            return n;
        }
        let node = &nodes[index];
        let n = if depth > MAX_DEPTH {
            u64::MAX // a plan deeper than any Python makes: every item is beyond the budget
        } else {
            match node.kind {
                Kind::Nullable(_) => count(nodes, node.children[0], depth + 1, memo),
                Kind::Record => node
                    .children
                    .iter()
                    .fold(1u64, |sum, &c| sum.saturating_add(count(nodes, c, depth + 1, memo))),
                // its symbol is copied into the column: the longest one's bytes in slots of 8
                // (kafka_group.registry.avro_shape.enum_slots charges the same)
                Kind::Enum => (node.names.iter().map(|s| s.len() as u64).max().unwrap_or(0)).div_ceil(8).max(1),
                _ => 1,
            }
        };
        memo[index] = Some(n);
        n
    }
    let mut memo = vec![None; nodes.len()];
    (0..nodes.len()).map(|i| count(nodes, i, 0, &mut memo)).collect()
}

impl Column {
    /// Room for `n` more values, here and in a record's fields (not in list items or map entries,
    /// whose number a payload sets). Caller: with `n` the batch's number of records.
    pub fn reserve(&mut self, n: usize) {
        self.valid.reserve(n);
        match &mut self.col {
            Col::Bool(v) => v.reserve(n),
            Col::I32(v, _) => v.reserve(n),
            Col::I64(v, _) => v.reserve(n),
            Col::F32(v) => v.reserve(n),
            Col::F64(v) => v.reserve(n),
            Col::Dec(v, _, _) => v.reserve(n),
            Col::Bytes(off, _, _) | Col::List(off, _) | Col::Map(off, _, _) => off.reserve(n),
            Col::Struct(_, kids) => kids.iter_mut().for_each(|k| k.reserve(n)),
        }
    }

    pub fn len(&self) -> usize {
        self.valid.len()
    }

    pub fn push_null(&mut self) {
        self.valid.push(false);
        match &mut self.col {
            Col::Bool(v) => v.push(false),
            Col::I32(v, _) => v.push(0),
            Col::I64(v, _) => v.push(0),
            Col::F32(v) => v.push(0.0),
            Col::F64(v) => v.push(0.0),
            Col::Dec(v, _, _) => v.push(0),
            Col::Bytes(off, _, _) | Col::List(off, _) | Col::Map(off, _, _) => off.push(*off.last().unwrap_or(&0)),
            Col::Struct(_, kids) => kids.iter_mut().for_each(Column::push_null),
        }
    }

    /// Back to its first `n` values (a fallback record's partial values go).
    pub fn truncate(&mut self, n: usize) {
        self.valid.truncate(n);
        match &mut self.col {
            Col::Bool(v) => v.truncate(n),
            Col::I32(v, _) => v.truncate(n),
            Col::I64(v, _) => v.truncate(n),
            Col::F32(v) => v.truncate(n),
            Col::F64(v) => v.truncate(n),
            Col::Dec(v, _, _) => v.truncate(n),
            Col::Bytes(off, data, _) => {
                off.truncate(n + 1);
                data.truncate(off[n] as usize);
            }
            Col::List(off, kid) => {
                off.truncate(n + 1);
                kid.truncate(off[n] as usize);
            }
            Col::Map(off, keys, values) => {
                off.truncate(n + 1);
                keys.truncate(off[n] as usize);
                values.truncate(off[n] as usize);
            }
            Col::Struct(_, kids) => kids.iter_mut().for_each(|k| k.truncate(n)),
        }
    }

    fn nulls(valid: Vec<bool>) -> Option<NullBuffer> {
        if valid.iter().all(|&v| v) {
            None
        } else {
            Some(NullBuffer::from(valid))
        }
    }

    pub fn finish(self) -> (DataType, ArrayRef) {
        let nulls = Column::nulls(self.valid);
        match self.col {
            Col::Bool(v) => (DataType::Boolean, Arc::new(BooleanArray::new(BooleanBuffer::from(v), nulls))),
            Col::I32(v, false) => (DataType::Int32, Arc::new(PrimitiveArray::<Int32Type>::new(ScalarBuffer::from(v), nulls))),
            Col::I32(v, true) => (DataType::Date32, Arc::new(PrimitiveArray::<Date32Type>::new(ScalarBuffer::from(v), nulls))),
            Col::I64(v, None) => (DataType::Int64, Arc::new(PrimitiveArray::<Int64Type>::new(ScalarBuffer::from(v), nulls))),
            Col::I64(v, Some(utc)) => {
                let array = PrimitiveArray::<TimestampMicrosecondType>::new(ScalarBuffer::from(v), nulls);
                let array = if utc { array.with_timezone("UTC") } else { array };
                (array.data_type().clone(), Arc::new(array))
            }
            Col::F32(v) => (DataType::Float32, Arc::new(PrimitiveArray::<Float32Type>::new(ScalarBuffer::from(v), nulls))),
            Col::F64(v) => (DataType::Float64, Arc::new(PrimitiveArray::<Float64Type>::new(ScalarBuffer::from(v), nulls))),
            Col::Dec(v, p, s) => {
                let array = Decimal128Array::new(ScalarBuffer::from(v), nulls)
                    .with_precision_and_scale(p, s)
                    .expect("precision and scale checked by the plan");
                (DataType::Decimal128(p, s), Arc::new(array))
            }
            Col::Bytes(off, data, utf8) => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(off));
                let data = Buffer::from_vec(data);
                if utf8 {
                    // SAFETY: every value was checked to be UTF-8 before it was appended, offsets grow.
                    let array = unsafe { GenericByteArray::<GenericStringType<i32>>::new_unchecked(offsets, data, nulls) };
                    (DataType::Utf8, Arc::new(array) as ArrayRef)
                } else {
                    (DataType::Binary, Arc::new(GenericByteArray::<GenericBinaryType<i32>>::new(offsets, data, nulls)))
                }
            }
            Col::List(off, kid) => {
                let (kind, values) = kid.finish();
                let field = Arc::new(Field::new("item", kind, true));
                let array = ListArray::new(field, OffsetBuffer::new(ScalarBuffer::from(off)), values, nulls);
                (array.data_type().clone(), Arc::new(array))
            }
            Col::Map(off, keys, values) => {
                let (_, keys) = keys.finish();
                let (kind, values) = values.finish();
                let fields = Fields::from(vec![Field::new("key", DataType::Utf8, false), Field::new("value", kind, true)]);
                let entries = StructArray::new(fields, vec![keys, values], None);
                let field = Arc::new(Field::new("entries", entries.data_type().clone(), false));
                let array = MapArray::new(field, OffsetBuffer::new(ScalarBuffer::from(off)), entries, nulls, false);
                (array.data_type().clone(), Arc::new(array))
            }
            Col::Struct(names, kids) => {
                let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = names
                    .into_iter()
                    .zip(kids)
                    .map(|(name, kid)| {
                        let (kind, array) = kid.finish();
                        (Field::new(name, kind, true), array)
                    })
                    .unzip();
                let array = StructArray::new(Fields::from(fields), arrays, nulls);
                (array.data_type().clone(), Arc::new(array))
            }
        }
    }
}

