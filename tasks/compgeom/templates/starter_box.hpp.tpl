${header}
// ${summary}
// Implement compgeom::${function} below. Keep the types and the signature as they are: the
// test harness includes this header and calls the function directly. Header-only (define
// everything inline), standard library only, and do not write to stdout.
#pragma once

#include <stdexcept>
#include <vector>

namespace compgeom {

// The closed box min[i] <= x[i] <= max[i]; min and max have the same length N >= 1.
struct AlignedBox {
    std::vector<double> min;
    std::vector<double> max;
};

enum class Kind { Invalid, None, Box };

// overlap is the intersection box for Kind::Box, and has empty min and max otherwise.
struct Intersection {
    Kind kind = Kind::None;
    AlignedBox overlap;
};

inline Intersection ${function}(const AlignedBox& box0, const AlignedBox& box1) {
    (void)box0;
    (void)box1;
    throw std::logic_error("${function} is not implemented yet");
}

}  // namespace compgeom
