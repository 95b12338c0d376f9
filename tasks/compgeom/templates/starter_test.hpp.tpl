${header}
// ${summary}
// Implement compgeom::${function} below. Keep the types and the signature as they are: the
// test harness includes this header and calls the function directly. Header-only (define
// everything inline), standard library only, and do not write to stdout.
#pragma once

#include <stdexcept>

namespace compgeom {

struct Vec2 {
    double x;
    double y;
};

${types}
enum class Kind { Invalid, None, Intersect };

// A test query: only whether the inputs intersect.
struct Intersection {
    Kind kind = Kind::None;
};

inline Intersection ${function}(const ${type0}& ${arg0}, const ${type1}& ${arg1}) {
    (void)${arg0};
    (void)${arg1};
    throw std::logic_error("${function} is not implemented yet");
}

}  // namespace compgeom
