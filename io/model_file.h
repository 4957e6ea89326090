// Model files: what `fgm train` writes and `fgm predict` / `fgm inspect` read.
// FlatBuffers with a checksummed preamble; verified on open.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/feature_key.h"
#include "core/memory_budget.h"

namespace fgm {

// Linear models are written as version 1 (what every fgm reads); a model with
// a kernel SVM as version 2, so that an older fgm refuses it instead of
// scoring it as a linear model without features. Both are read.
inline constexpr uint32_t kModelFormatVersion = 1;
inline constexpr uint32_t kKernelModelFormatVersion = 2;

struct ModelFeature {
  FeatureKey key;
  double weight = 0;
  uint32_t batch = 0;
};

// One recorded stage of features.transform (features/transforms.h applies them).
struct ModelTransform {
  std::string name;
  // Per-feature stages: feature ids[k] is multiplied by factors[k], every other
  // feature by absent_factor (ids increasing). Empty for the other stages.
  std::vector<uint64_t> ids;
  std::vector<double> factors;
  double absent_factor = 1;
  bool operator==(const ModelTransform& o) const {
    return name == o.name && ids == o.ids && factors == o.factors && absent_factor == o.absent_factor;
  }
};

// One class of a one-vs-rest model (its decision value: w'x - bias).
struct ClassModel {
  double label = 0;  // the original label value
  std::vector<ModelFeature> features;
  double bias = 0;
  double objective = 0;
  uint32_t iterations = 0;
};

// A kernel SVM on selected features (solver pnorm_kta, kta.kernel = "rbf";
// schema table KernelSvm). Decision value, oriented towards the positive label:
//   f(x) = Σ_s dual_coefs[s] Σ_j kernel_weights[j] exp(−(x_{feature_ids[j]} − sv(s)[j])² / (2 bandwidths[j]²)) − Model::bias,
// sv(s) = support_vectors[s·m .. s·m + m), m = feature_ids.size().
struct KernelSvm {
  std::string kernel;  // "rbf"; empty: the model has no kernel SVM
  std::vector<uint64_t> feature_ids;  // 0-based, strictly increasing
  std::vector<double> kernel_weights, bandwidths;  // d_j > 0, h_j > 0
  std::vector<float> support_vectors;  // row-major n_support × m
  std::vector<double> dual_coefs;      // y_s α_s
  uint64_t training_rows = 0;
  size_t n_support() const { return dual_coefs.size(); }
  // Bytes of the arrays (what a reader reserves from its MemoryBudget).
  uint64_t bytes() const {
    return feature_ids.size() * 24 + support_vectors.size() * sizeof(float) + dual_coefs.size() * sizeof(double);
  }
};

struct Model {
  std::string engine_version;
  std::string solver = "fgm";  // config key `solver`: which method made the model
  std::string loss = "squared_hinge";
  double C = 0;
  uint64_t B = 0;
  uint32_t iterations = 0;
  bool has_bias = false;
  double bias = 0;  // decision value is w'x - bias
  uint64_t n_features = 0;
  int index_base = 1;
  double positive_label = 1;
  double negative_label = -1;
  uint64_t store_checksum = 0;
  uint64_t input_checksum = 0;
  std::string input_path;
  std::string feature_kind = "linear";
  std::vector<ModelFeature> features;
  double gamma = 1, coef0 = 1;
  uint32_t levels = 0, order = 0;
  double period = 0;
  std::string kernel;
  std::vector<float> scale_min, scale_max;
  // scale_min[k]/scale_max[k] belong to base feature scale_ids[k]; when empty,
  // to base feature k.
  std::vector<uint64_t> scale_ids;
  std::map<std::string, std::string> config;
  int64_t created_unix = 0;
  double objective = 0;
  // Non-empty: a one-vs-rest model, one entry per class in increasing label
  // order (features and bias above are then unused). Empty: binary.
  std::vector<ClassModel> classes;
  bool multiclass() const { return !classes.empty(); }
  // Applied to raw rows before scoring, in order (empty: none).
  std::vector<ModelTransform> transforms;
  // A kernel SVM (then `features` is empty and `bias` is its offset).
  KernelSvm kernel_svm;
  bool has_kernel_svm() const { return !kernel_svm.kernel.empty(); }
};

// Class k of a one-vs-rest model as a binary model, sharing the feature-space
// parameters: what the scorer evaluates. Its label map is that of the
// relabelled problem (+1 for class k's rows, -1 for the rest).
Model class_model(const Model& model, size_t k);

// Atomic write (temporary name, then rename).
void write_model(const std::string& path, const Model& model);
// The bytes write_model writes, and their inverse (`path` names the source in
// messages); used to embed models in resume checkpoints.
std::string encode_model(const Model& model);
Model decode_model(std::string_view bytes, const std::string& path);
// Throws Error(kIo) if unreadable, Error(kCorruption) with msg::not_a_model if
// it is not a valid model (bad magic, checksum, FlatBuffer, or version).
Model read_model(const std::string& path);
// The same, with the memory of a kernel SVM's arrays (the file's buffer while
// it is decoded, then the decoded arrays) reserved from `budget`; the
// reservation of the arrays is returned in `kernel_memory`.
Model read_model(const std::string& path, MemoryBudget& budget, Reservation& kernel_memory);

}  // namespace fgm
