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
    Intersect,
}

/// A test query: only whether the inputs intersect.
#[derive(Debug, Clone, PartialEq)]
pub struct Intersection {
    pub kind: Kind,
}

pub fn ${function}(${arg0}: &${type0}, ${arg1}: &${type1}) -> Intersection {
    todo!("${function}({:?}, {:?})", ${arg0}, ${arg1})
}
