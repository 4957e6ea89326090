// Synthetic data with a planted ground truth (FGM Section 8.2): X with i.i.d.
// N(0,1) entries, a sparse w whose `relevant` nonzeros are U(0,1), labels
// y = sign(Xw) (0 counts as +1), and a separate test set from the same w.
// Written as LIBSVM text (train.svm, test.svm) with truth.txt beside them: one
// line per planted feature, "<1-based id> <weight>".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fgm {

struct SynthOptions {
  uint64_t rows = 4096;
  uint64_t test_rows = 4096;
  uint64_t features = 4096;
  uint64_t relevant = 300;
  uint64_t seed = 1;
  int digits = 5;  // significant digits written per value
  // Grouped generator only (write_grouped_synthetic).
  uint64_t features_per_group = 10;
  uint64_t relevant_groups = 100;
  uint64_t group_overlap = 0;  // features each group shares with the next (< features_per_group)
};

struct PlantedTruth {
  std::vector<uint64_t> ids;  // linear terms: 0-based, increasing
  std::vector<double> weights;
  // Sparse generator (synth/synthetic_sparse.h) only: cross terms x_j * x_k
  // (0-based, first < second) and the bias of the planted model.
  std::vector<std::pair<uint64_t, uint64_t>> cross_ids;
  std::vector<double> cross_weights;
  double bias = 0;
};

// Writes <dir>/train.svm, <dir>/test.svm, <dir>/truth.txt (each atomically).
PlantedTruth write_gaussian_synthetic(const std::string& dir, const SynthOptions& options);

// The grouped design of FGM Section 8.6.1: the same Gaussian X and labels
// y = sign(Xw), the features split into consecutive groups of
// `features_per_group` (the last group takes the remainder), and
// `relevant_groups` groups drawn uniformly whose features get i.i.d. N(0,1)
// weights (`relevant` is unused). With `group_overlap` = k > 0 the groups are
// sliding windows: group g starts at g·(features_per_group − k), so
// neighbours share k features (features.group_structure = overlapping); a
// feature of two planted groups gets one weight, and the last window ends at
// the last feature. Writes train.svm, test.svm, truth.txt (every
// planted feature, as above), groups.txt (line g lists the 1-based ids of
// group g: the file features.groups reads) and planted_groups.txt (the planted
// groups' 1-based line numbers in groups.txt, increasing).
struct GroupedTruth {
  PlantedTruth features;
  std::vector<uint64_t> groups;  // planted groups, 0-based, increasing
};
GroupedTruth write_grouped_synthetic(const std::string& dir, const SynthOptions& options);

// Reads truth.txt (1-based ids): "<id> <weight>" lines (this generator), or
// "linear <id> <weight>", "cross <j> <k> <weight>" and "bias <b>" lines (the
// sparse generator); '#' starts a comment. Throws kInvalidInput with file:line on junk.
PlantedTruth read_truth(const std::string& path);

}  // namespace fgm
