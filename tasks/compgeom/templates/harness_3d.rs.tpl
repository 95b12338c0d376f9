${header}
// Reads the case inputs from stdin, calls candidate::${function} once per case and prints one
// record per case. The expected outputs never come here: the host compares the records.
//   stdin:  <count>, then per case ${width} numbers (the two inputs' fields in order)
//   stdout: "R <index> <kind> <n> <t...> <n> <x y z...>" per case, or "E <index>"
//           when the candidate panicked; then "END <count>". Numbers are printed with {:?}.
#[allow(dead_code)]
mod candidate;

use std::io::{self, BufWriter, Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

static PANIC_REPORTED: AtomicBool = AtomicBool::new(false);

fn kind_name(kind: &candidate::Kind) -> &'static str {
    match kind {
        candidate::Kind::Invalid => "invalid",
        candidate::Kind::None => "none",
        candidate::Kind::Point => "point",
        candidate::Kind::Segment => "segment",
    }
}

fn put_list(out: &mut String, values: &[f64]) {
    out.push_str(&format!(" {}", values.len()));
    for value in values {
        out.push_str(&format!(" {:?}", value));
    }
}

fn record(index: usize, result: &candidate::Intersection) -> String {
    let mut out = format!("R {} {}", index, kind_name(&result.kind));
    put_list(&mut out, &result.t);
    out.push_str(&format!(" {}", result.points.len()));
    for point in &result.points {
        out.push_str(&format!(" {:?} {:?} {:?}", point.x, point.y, point.z));
    }
    out
}

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).expect("read stdin");
    let tokens: Vec<&str> = input.split_ascii_whitespace().collect();
    let count: usize = tokens.first().and_then(|t| t.parse().ok()).expect("case count");
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !PANIC_REPORTED.swap(true, Ordering::SeqCst) {
            default_hook(info);
        }
    }));
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut pos = 1;
    for index in 0..count {
        let v: Vec<f64> = tokens[pos..pos + ${width}].iter().map(|t| t.parse().expect("number")).collect();
        pos += ${width};
        let arg0 = ${arg0};
        let arg1 = ${arg1};
        let line = match panic::catch_unwind(AssertUnwindSafe(|| candidate::${function}(&arg0, &arg1))) {
            Ok(result) => record(index, &result),
            Err(_) => format!("E {}", index),
        };
        writeln!(out, "{}", line).expect("write stdout");
    }
    writeln!(out, "END {}", count).expect("write stdout");
}
