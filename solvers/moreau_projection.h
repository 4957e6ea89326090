// Allocation-free form of Algorithm 3 (FGM, Tan/Tsang/Wang JMLR 2014) for the
// APG line search, which calls it once per trial step. Private to solvers/.
#pragma once

#include <cstddef>
#include <vector>

namespace fgm::detail {

// Writes scale_h = o_h/ô_h (0 when the group vanishes or ô_h = 0) for the t
// group norms `norms` and s = 1/τ. `order` is scratch space. Returns ς.
double moreau_scales(const double* norms, size_t t, double s, double* scales,
                     std::vector<size_t>& order);

}  // namespace fgm::detail
