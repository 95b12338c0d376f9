${header}
//! ${summary}
//! Implement `${function}` below. Keep the types and the signature as they are: the test
//! harness declares `mod candidate;` and calls `candidate::${function}` directly. Standard
//! library only, and do not write to stdout.

/// The closed box `min[i] <= x[i] <= max[i]`; `min` and `max` have the same length N >= 1.
#[derive(Debug, Clone, PartialEq)]
pub struct AlignedBox {
    pub min: Vec<f64>,
    pub max: Vec<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    None,
    Box,
}

/// `overlap` is the intersection box for `Kind::Box`, and has empty `min` and `max` otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Intersection {
    pub kind: Kind,
    pub overlap: AlignedBox,
}

pub fn ${function}(box0: &AlignedBox, box1: &AlignedBox) -> Intersection {
    todo!("${function}({:?}, {:?})", box0, box1)
}
