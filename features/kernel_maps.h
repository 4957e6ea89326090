// Explicit feature maps of additive kernels (FGM Section 6.1, 8.6): each base
// feature x_j, scaled to [0,1], becomes one group of generated features φ(x_j)
// whose inner products approximate a kernel on that feature.
//
//  * HIK (Wu 2012), r levels: φ(x)_l = sqrt(1/r)·clamp(r·x − l, 0, 1),
//    l = 0..r−1 (the paper's k = l+1). φ(x)'φ(z) = min(x, z) exactly when x
//    and z lie in different cells [l/r, (l+1)/r) or on the grid {l/r}; inside
//    one cell, x = (l+s)/r, z = (l+t)/r, it is (l + s·t)/r, so the error is
//    min(s,t) − s·t ∈ [0, 1/4] divided by r: 0 ≤ min(x,z) − φ(x)'φ(z) ≤ 1/(4r).
//  * Additive kernels (Vedaldi & Zisserman 2010), order n, period L: 2n+1
//    components sqrt(x·L·κ(0)), sqrt(2·x·L·κ(jL))·cos(jL·log x),
//    sqrt(2·x·L·κ(jL))·sin(jL·log x) (j = 1..n, components 2j−1 and 2j);
//    all zero for x = 0. κ(λ) = sech(πλ) for χ² (k(x,z) = 2xz/(x+z)),
//    κ(λ) = 2/(π(1+4λ²)) for the intersection kernel (k = min(x,z)).
//    Since k(x,z) = sqrt(xz)·K(log x − log z), the worst error over
//    (x,z) ∈ (0,1]² is sup_ω e^{−|ω|/2}·|K_n,L(ω) − K(ω)|, a 1-D function of
//    (n, L). additive_default_period() returns the L minimising it (table
//    measured for n = 1..50); for n = 5: L = 0.377, max error 1.52e-3 (χ²),
//    L = 0.748, max error 4.64e-2 (intersection: its spectrum decays only as
//    1/λ², so the map converges slowly; order 20 gives 1.7e-2).
//
// fgm stores and scores generated values as float32, like the store's values
// (see expansion_feature_value); these maps are the double-precision maps.
// Component index = FeatureKey.level (0-based).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/feature_key.h"
#include "io/model_file.h"

namespace fgm {

// clamp((x − min)/(max − min), 0, 1); 0 when max <= min.
double scale_to_unit(double x, double min, double max);

enum class AdditiveKernel : uint8_t { kChi2 = 0, kIntersection = 1 };
const char* additive_kernel_name(AdditiveKernel kernel);            // "chi2" | "intersection"
std::optional<AdditiveKernel> parse_additive_kernel(const std::string& name);
// κ(λ): the kernel's spectrum.
double additive_kernel_spectrum(AdditiveKernel kernel, double lambda);
// The period L with the smallest worst-case error over (0,1]² for this order
// (1..50; larger orders use the order-50 value).
double additive_default_period(AdditiveKernel kernel, uint32_t order);

inline constexpr uint32_t kMaxAdditiveOrder = 50;

// One base feature's map (HIK or additive). Inputs are scaled values; they are
// clamped to [0,1]. component(x, l) is bit-identical to eval(x)[l].
class ExpansionMap {
 public:
  static ExpansionMap hik(uint32_t levels);
  static ExpansionMap additive(AdditiveKernel kernel, uint32_t order, double period);

  FeatureKind kind() const { return kind_; }
  uint32_t dim() const { return dim_; }
  uint32_t levels() const { return levels_; }  // hik
  uint32_t order() const { return order_; }    // additive
  double period() const { return period_; }    // additive
  AdditiveKernel kernel() const { return kernel_; }

  void eval(double x, double* out) const;  // dim() values
  std::vector<double> eval(double x) const;
  double component(double x, uint32_t level) const;

  // HIK only: with q = r·x, components l < full are sqrt(1/r), component
  // `full` (if < r) is `partial`, the rest are 0. Same values as eval().
  struct HikSplit {
    uint32_t full = 0;
    double partial = 0;
  };
  HikSplit hik_split(double x) const;
  double hik_unit() const { return unit_; }  // sqrt(1/r)

 private:
  ExpansionMap() = default;
  // Additive components 0..2·jmax into out.
  void additive_prefix(double x, uint32_t jmax, double* out) const;

  FeatureKind kind_ = FeatureKind::kHik;
  uint32_t dim_ = 0;
  uint32_t levels_ = 0, order_ = 0;
  double period_ = 0;
  AdditiveKernel kernel_ = AdditiveKernel::kChi2;
  double unit_ = 0;           // hik: sqrt(1/r)
  std::vector<double> coef_;  // additive: sqrt(L·κ(0)), sqrt(2·L·κ(jL))
};

// The map a model's hik/additive features were generated with
// (model.levels, or model.order/period/kernel). Throws Error(kCorruption) if
// the model's parameters are not a valid map.
ExpansionMap expansion_map_of(const Model& model);

// Prediction: value of a selected hik/additive feature f (f.key.ids[0] = base
// feature j, f.key.level = component) on a raw base value (0 when the row has
// no entry for j), using the model's scaling of j (scale_ids/scale_min/
// scale_max; with no scale_ids, scale_min[j]/scale_max[j]). Returns the same
// float32-rounded value training used. Builds the map and looks up the scale
// on every call: for many rows use ExpansionEvaluator.
double expansion_feature_value(const Model& model, const ModelFeature& f, double raw_x);

class ExpansionEvaluator {
 public:
  explicit ExpansionEvaluator(const Model& model);
  double value(const ModelFeature& f, double raw_x) const;
  // Scaled value x' of base feature j; throws Error(kCorruption) if the model
  // has no scaling for j.
  double scaled(uint64_t base_feature, double raw_x) const;
  const ExpansionMap& map() const { return map_; }

 private:
  ExpansionMap map_;
  std::vector<uint64_t> ids_;  // sorted base features with a scaling (empty: dense, slot = id)
  std::vector<float> min_, max_;
};

// The model fields of an expansion space: the map's parameters and, for each
// selected base feature in increasing id order, its scaling range
// (column_range(j) = {min_j, max_j}). Shared by the single-store and the
// distributed spaces so their model files agree.
void describe_expansion_model(const ExpansionMap& map, std::vector<uint64_t> selected_ids,
                              const std::function<std::pair<float, float>(uint64_t)>& column_range, Model& model);

}  // namespace fgm
