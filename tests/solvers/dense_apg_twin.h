// The dense APG twin (dense_apg_twin.cpp): the solver of solvers/apg.cpp as
// it was before its per-row work was restricted to the rows the selected
// columns touch. Same interface and semantics as solve_apg.
#pragma once

#include <cstdint>
#include <vector>

#include "solvers/apg.h"

namespace fgm::test {

ApgResult solve_apg_dense(const SelectedFeatureCache& cache, const int8_t* labels,
                          const ApgOptions& options, ApgState& state, std::vector<double>& decision,
                          MemoryBudget& budget);

}  // namespace fgm::test
