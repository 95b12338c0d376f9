${header}
// ${summary}
// Implement compgeom::${function} below. Keep the types and the signature as they are: the
// test harness includes this header and calls the function directly. Header-only (define
// everything inline), standard library only, and do not write to stdout.
#pragma once

#include <stdexcept>
#include <vector>

namespace compgeom {

struct Vec3 {
    double x;
    double y;
    double z;
};

${types}
enum class Kind { Invalid, None, Point, Segment };

// points[i] is the i-th reported point and t[i] its parameter on the first input. The kind
// fixes how many entries the two lists hold.
struct Intersection {
    Kind kind = Kind::None;
    std::vector<double> t;
    std::vector<Vec3> points;
};

inline Intersection ${function}(const ${type0}& ${arg0}, const ${type1}& ${arg1}) {
    (void)${arg0};
    (void)${arg1};
    throw std::logic_error("${function} is not implemented yet");
}

}  // namespace compgeom
