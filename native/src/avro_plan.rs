//! The plan the compiled Avro decoder ([`crate::avro`]) follows, as Python's
//! `kafka_group.registry.avro_native` sends it: a table of schema nodes, checked here once
//! (known kinds, children within the plan, arity) before any payload is read. Both the decoder
//! and the column it fills ([`crate::avro_column`]) read it; neither is imported from here.

/// The deepest plan accepted (the Python side plans only schemas of at most 500 levels).
pub const MAX_DEPTH: usize = 600;

/// One node of a plan, as Python sends it: (kind, a, b, c, children, names).
pub type PlanNode = (String, i64, i64, i64, Vec<usize>, Vec<String>);

#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    Bool,
    Int,
    Long,
    Float,
    Double,
    Str,
    Bytes,
    Fixed(usize),
    Enum,
    Date,
    /// A timestamp in microseconds after reading: (is UTC, is millis on the wire).
    Ts(bool, bool),
    /// precision, scale, fixed size (0: bytes)
    Dec(u8, i8, usize),
    Array,
    Map,
    Record,
    /// [null, T]: the null branch's index
    Nullable(i64),
}

pub struct Node {
    pub kind: Kind,
    pub children: Vec<usize>,
    pub names: Vec<String>,
}

pub fn parse_plan(plan: Vec<PlanNode>) -> Result<Vec<Node>, String> {
    let n = plan.len();
    let mut nodes = Vec::with_capacity(n);
    for (kind, a, b, c, children, names) in plan {
        let want = |k: usize| if children.len() == k { Ok(()) } else { Err(format!("node {kind} wants {k} children")) };
        let kind = match kind.as_str() {
            "boolean" => Kind::Bool,
            "int" => Kind::Int,
            "long" => Kind::Long,
            "float" => Kind::Float,
            "double" => Kind::Double,
            "string" => Kind::Str,
            "bytes" => Kind::Bytes,
            "fixed" if (1..=1 << 20).contains(&a) => Kind::Fixed(a as usize),
            "enum" if !names.is_empty() => Kind::Enum,
            "date" => Kind::Date,
            "timestamp" => Kind::Ts(a != 0, b != 0),
            "decimal" if (1..=38).contains(&a) && (0..=a).contains(&b) && (0..=16).contains(&c) => {
                Kind::Dec(a as u8, b as i8, c as usize)
            }
            "array" => {
                want(1)?;
                Kind::Array
            }
            "map" => {
                want(1)?;
                Kind::Map
            }
            "record" if !children.is_empty() && children.len() == names.len() => Kind::Record,
            "nullable" if a == 0 || a == 1 => {
                want(1)?;
                Kind::Nullable(a)
            }
            other => return Err(format!("plan node {other:?} is not one this decoder reads")),
        };
        if children.iter().any(|&c| c >= n) {
            return Err("plan node refers past the plan".into());
        }
        nodes.push(Node { kind, children, names });
    }
    if nodes.is_empty() {
        return Err("empty plan".into());
    }
    Ok(nodes)
}
