${header}
// ${summary}
// Implement compgeom::${function} below. Keep the types and the signature as they are: the
// test harness includes this header and calls the function directly. Header-only (define
// everything inline), standard library only, and do not write to stdout.
#pragma once

#include <stdexcept>
#include <vector>

namespace compgeom {

struct Vec2 {
    double x;
    double y;
};

${types}
enum class Kind { Invalid, None, Point, Segment, Ray, Line };

// points[i] is the i-th reported point; t0[i] and t1[i] are its parameters on the first and
// on the second input. The kind fixes how many entries the three lists hold.
struct Intersection {
    Kind kind = Kind::None;
    std::vector<double> t0;
    std::vector<double> t1;
    std::vector<Vec2> points;
};

inline Intersection ${function}(const ${type0}& ${arg0}, const ${type1}& ${arg1}) {
    (void)${arg0};
    (void)${arg1};
    throw std::logic_error("${function} is not implemented yet");
}

}  // namespace compgeom
