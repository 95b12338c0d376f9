${header}
// Reads the case inputs from stdin, calls compgeom::${function} once per case and prints one
// record per case. The expected outputs never come here: the host compares the records.
//   stdin:  <count>, then per case N and 4*N numbers (box0.min, box0.max, box1.min, box1.max)
//   stdout: "R <index> <kind> <n> <min...> <n> <max...>" per case, or "E <index>" when the
//           candidate threw; then "END <count>". Numbers are printed with %.17g.
#include "candidate.hpp"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

const char* kind_name(compgeom::Kind kind) {
    switch (kind) {
        case compgeom::Kind::Invalid: return "invalid";
        case compgeom::Kind::None: return "none";
        case compgeom::Kind::Box: return "box";
    }
    return "unknown";
}

void put_list(std::string& out, const std::vector<double>& values) {
    out += " " + std::to_string(values.size());
    for (double value : values) {
        char buffer[40];
        std::snprintf(buffer, sizeof buffer, " %.17g", value);
        out += buffer;
    }
}

std::string record(long index, const compgeom::Intersection& result) {
    std::string out = "R " + std::to_string(index) + " " + kind_name(result.kind);
    put_list(out, result.overlap.min);
    put_list(out, result.overlap.max);
    return out;
}

}  // namespace

int main() {
    long count = 0;
    if (std::scanf("%ld", &count) != 1 || count < 0) return 2;
    bool reported = false;
    for (long index = 0; index < count; ++index) {
        long n = 0;
        if (std::scanf("%ld", &n) != 1 || n < 1 || n > 64) return 2;
        std::vector<double> v(4 * n);
        for (double& x : v) {
            if (std::scanf("%lf", &x) != 1) return 2;
        }
        const auto part = [&](long k) { return std::vector<double>(v.begin() + k * n, v.begin() + (k + 1) * n); };
        const compgeom::AlignedBox box0{part(0), part(1)};
        const compgeom::AlignedBox box1{part(2), part(3)};
        std::string line;
        try {
            line = record(index, compgeom::${function}(box0, box1));
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
