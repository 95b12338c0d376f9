${header}
//! ${summary}
//! Implement `${function}` below. Keep the types and the signature as they are: the test
//! harness declares `mod candidate;` and calls `candidate::${function}` directly. Standard
//! library only, and do not write to stdout.

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Vec2 {
    pub x: f64,
    pub y: f64,
}

${types}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    None,
    Point,
    Segment,
    Ray,
    Line,
}

/// `points[i]` is the i-th reported point; `t0[i]` and `t1[i]` are its parameters on the first
/// and on the second input. The kind fixes how many entries the three vectors hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Intersection {
    pub kind: Kind,
    pub t0: Vec<f64>,
    pub t1: Vec<f64>,
    pub points: Vec<Vec2>,
}

pub fn ${function}(${arg0}: &${type0}, ${arg1}: &${type1}) -> Intersection {
    todo!("${function}({:?}, {:?})", ${arg0}, ${arg1})
}
