${header}
// Reads the case inputs from stdin, calls compgeom::${function} once per case and prints one
// record per case. The expected outputs never come here: the host compares the records.
//   stdin:  <count>, then per case ${width} numbers (the two inputs' fields in order)
//   stdout: "R <index> <kind>" per case, or "E <index>" when the candidate threw; then
//           "END <count>".
#include "candidate.hpp"

#include <cstdio>
#include <exception>
#include <string>

namespace {

const char* kind_name(compgeom::Kind kind) {
    switch (kind) {
        case compgeom::Kind::Invalid: return "invalid";
        case compgeom::Kind::None: return "none";
        case compgeom::Kind::Intersect: return "intersect";
    }
    return "unknown";
}

std::string record(long index, const compgeom::Intersection& result) {
    return "R " + std::to_string(index) + " " + kind_name(result.kind);
}

}  // namespace

int main() {
    long count = 0;
    if (std::scanf("%ld", &count) != 1 || count < 0) return 2;
    bool reported = false;
    for (long index = 0; index < count; ++index) {
        double v[${width}];
        for (double& x : v) {
            if (std::scanf("%lf", &x) != 1) return 2;
        }
        std::string line;
        try {
            line = record(index, compgeom::${function}(${arg0}, ${arg1}));
        } catch (const std::exception& error) {
            if (!reported) std::fprintf(stderr, "case %ld: exception: %s\n", index, error.what());
            reported = true;
            line = "E " + std::to_string(index);
        } catch (...) {
            line = "E " + std::to_string(index);
        }
        std::printf("%s\n", line.c_str());
    }
    std::printf("END %ld\n", count);
    return 0;
}
