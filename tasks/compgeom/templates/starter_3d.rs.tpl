${header}
//! ${summary}
//! Implement `${function}` below. Keep the types and the signature as they are: the test
//! harness declares `mod candidate;` and calls `candidate::${function}` directly. Standard
//! library only, and do not write to stdout.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vec3 {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

${types}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    None,
    Point,
    Segment,
}

/// `points[i]` is the i-th reported point and `t[i]` its parameter on the first input. The kind
/// fixes how many entries the two vectors hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Intersection {
    pub kind: Kind,
    pub t: Vec<f64>,
    pub points: Vec<Vec3>,
}

pub fn ${function}(${arg0}: &${type0}, ${arg1}: &${type1}) -> Intersection {
    todo!("${function}({:?}, {:?})", ${arg0}, ${arg1})
}
