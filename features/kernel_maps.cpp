#include "features/kernel_maps.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Periods minimising sup_{(x,z) ∈ (0,1]²} |φ(x)'φ(z) − k(x,z)| for orders
// 1..50, measured by scanning L ∈ [0.02, 2] in steps of 0.005 (then 0.001
// around the best) with ω = log(x/z) ∈ [0, 40] in steps of 0.0025.
constexpr double kChi2Period[kMaxAdditiveOrder] = {
    0.624, 0.510, 0.445, 0.407, 0.377, 0.352, 0.331, 0.314, 0.299, 0.286,
    0.275, 0.264, 0.255, 0.247, 0.240, 0.233, 0.227, 0.221, 0.215, 0.210,
    0.206, 0.201, 0.197, 0.193, 0.190, 0.186, 0.183, 0.180, 0.177, 0.174,
    0.172, 0.169, 0.167, 0.164, 0.162, 0.160, 0.158, 0.156, 0.154, 0.152,
    0.150, 0.149, 0.147, 0.145, 0.144, 0.142, 0.141, 0.139, 0.138, 0.137};
constexpr double kIntersectionPeriod[kMaxAdditiveOrder] = {
    1.010, 0.893, 0.826, 0.781, 0.748, 0.723, 0.702, 0.685, 0.670, 0.658,
    0.647, 0.637, 0.629, 0.621, 0.613, 0.607, 0.601, 0.595, 0.590, 0.585,
    0.580, 0.576, 0.572, 0.568, 0.565, 0.561, 0.558, 0.555, 0.552, 0.549,
    0.546, 0.544, 0.541, 0.539, 0.536, 0.534, 0.532, 0.530, 0.528, 0.526,
    0.524, 0.522, 0.520, 0.519, 0.517, 0.515, 0.514, 0.512, 0.511, 0.509};

double unit_clamp(double x) {
  if (!(x > 0)) return 0;  // also NaN
  return x < 1 ? x : 1;
}

[[noreturn]] void bad_model(const std::string& detail) {
  throw Error(ErrorKind::kCorruption, msg::not_a_model("", detail));
}

}  // namespace

double scale_to_unit(double x, double min, double max) {
  if (!(max > min)) return 0;
  return unit_clamp((x - min) / (max - min));
}

const char* additive_kernel_name(AdditiveKernel kernel) {
  return kernel == AdditiveKernel::kChi2 ? "chi2" : "intersection";
}

std::optional<AdditiveKernel> parse_additive_kernel(const std::string& name) {
  if (name == "chi2") return AdditiveKernel::kChi2;
  if (name == "intersection") return AdditiveKernel::kIntersection;
  return std::nullopt;
}

double additive_kernel_spectrum(AdditiveKernel kernel, double lambda) {
  if (kernel == AdditiveKernel::kChi2) return 1.0 / std::cosh(kPi * lambda);
  return 2.0 / (kPi * (1.0 + 4.0 * lambda * lambda));
}

double additive_default_period(AdditiveKernel kernel, uint32_t order) {
  uint32_t n = std::clamp<uint32_t>(order, 1, kMaxAdditiveOrder);
  return kernel == AdditiveKernel::kChi2 ? kChi2Period[n - 1] : kIntersectionPeriod[n - 1];
}

ExpansionMap ExpansionMap::hik(uint32_t levels) {
  if (levels < 1)
    throw Error(ErrorKind::kConfig, msg::out_of_range("", "features.levels", "0", "at least 1"));
  ExpansionMap m;
  m.kind_ = FeatureKind::kHik;
  m.levels_ = levels;
  m.dim_ = levels;
  m.unit_ = std::sqrt(1.0 / static_cast<double>(levels));
  return m;
}

ExpansionMap ExpansionMap::additive(AdditiveKernel kernel, uint32_t order, double period) {
  if (order < 1 || order > kMaxAdditiveOrder)
    throw Error(ErrorKind::kConfig, msg::out_of_range("", "features.order", std::to_string(order),
                                                      fmt::format("1..{}", kMaxAdditiveOrder)));
  if (!(period > 0) || !std::isfinite(period))
    throw Error(ErrorKind::kConfig,
                msg::out_of_range("", "features.period", fmt::format("{}", period), "> 0"));
  ExpansionMap m;
  m.kind_ = FeatureKind::kAdditive;
  m.order_ = order;
  m.dim_ = 2 * order + 1;
  m.period_ = period;
  m.kernel_ = kernel;
  m.coef_.resize(order + 1);
  m.coef_[0] = std::sqrt(period * additive_kernel_spectrum(kernel, 0.0));
  for (uint32_t j = 1; j <= order; ++j)
    m.coef_[j] = std::sqrt(2.0 * period * additive_kernel_spectrum(kernel, j * period));
  return m;
}

ExpansionMap::HikSplit ExpansionMap::hik_split(double x) const {
  double q = static_cast<double>(levels_) * unit_clamp(x);
  HikSplit s;
  double f = std::floor(q);
  s.full = static_cast<uint32_t>(f);
  if (s.full >= levels_) {
    s.full = levels_;
    s.partial = 0;
  } else {
    s.partial = unit_ * (q - f);  // sqrt(1/r)·clamp(q − full, 0, 1); q − floor(q) is exact
  }
  return s;
}

void ExpansionMap::additive_prefix(double x, uint32_t jmax, double* out) const {
  x = unit_clamp(x);
  if (x == 0) {
    std::fill(out, out + 2 * jmax + 1, 0.0);
    return;
  }
  const double sx = std::sqrt(x);
  const double theta = period_ * std::log(x);
  const double c1 = std::cos(theta), s1 = std::sin(theta);
  out[0] = coef_[0] * sx;
  // cos(jθ), sin(jθ) by the angle-addition recurrence (drift ~ j ulp).
  double c = c1, s = s1;
  for (uint32_t j = 1; j <= jmax; ++j) {
    const double a = coef_[j] * sx;
    out[2 * j - 1] = a * c;
    out[2 * j] = a * s;
    const double cn = c * c1 - s * s1;
    s = s * c1 + c * s1;
    c = cn;
  }
}

void ExpansionMap::eval(double x, double* out) const {
  if (kind_ == FeatureKind::kHik) {
    HikSplit s = hik_split(x);
    std::fill(out, out + s.full, unit_);
    if (s.full < levels_) {
      out[s.full] = s.partial;
      std::fill(out + s.full + 1, out + levels_, 0.0);
    }
    return;
  }
  additive_prefix(x, order_, out);
}

std::vector<double> ExpansionMap::eval(double x) const {
  std::vector<double> out(dim_);
  eval(x, out.data());
  return out;
}

double ExpansionMap::component(double x, uint32_t level) const {
  FGM_ASSERT(level < dim_);
  if (kind_ == FeatureKind::kHik) {
    HikSplit s = hik_split(x);
    if (level < s.full) return unit_;
    return level == s.full ? s.partial : 0.0;
  }
  double buf[2 * kMaxAdditiveOrder + 1];
  uint32_t j = (level + 1) / 2;
  additive_prefix(x, j, buf);
  return buf[level];
}

ExpansionMap expansion_map_of(const Model& model) {
  if (model.feature_kind == "hik") {
    if (model.levels < 1) bad_model("hik model with 0 levels");
    return ExpansionMap::hik(model.levels);
  }
  if (model.feature_kind == "additive") {
    auto kernel = parse_additive_kernel(model.kernel);
    if (!kernel) bad_model(fmt::format("unknown additive kernel '{}'", model.kernel));
    if (model.order < 1 || model.order > kMaxAdditiveOrder)
      bad_model(fmt::format("additive order {} outside 1..{}", model.order, kMaxAdditiveOrder));
    if (!(model.period > 0) || !std::isfinite(model.period))
      bad_model(fmt::format("additive period {} is not positive", model.period));
    return ExpansionMap::additive(*kernel, model.order, model.period);
  }
  bad_model(fmt::format("feature kind '{}' has no expansion map", model.feature_kind));
}

ExpansionEvaluator::ExpansionEvaluator(const Model& model) : map_(expansion_map_of(model)) {
  if (model.scale_min.size() != model.scale_max.size())
    bad_model("scale_min and scale_max differ in length");
  if (model.scale_ids.empty()) {
    min_ = model.scale_min;
    max_ = model.scale_max;
    return;
  }
  if (model.scale_ids.size() != model.scale_min.size())
    bad_model("scale_ids and scale_min differ in length");
  std::vector<size_t> order(model.scale_ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return model.scale_ids[a] < model.scale_ids[b]; });
  for (size_t k : order) {
    if (!ids_.empty() && ids_.back() == model.scale_ids[k]) bad_model("duplicate scale_ids entry");
    ids_.push_back(model.scale_ids[k]);
    min_.push_back(model.scale_min[k]);
    max_.push_back(model.scale_max[k]);
  }
}

double ExpansionEvaluator::scaled(uint64_t base_feature, double raw_x) const {
  size_t slot;
  if (ids_.empty()) {
    slot = static_cast<size_t>(base_feature);
    if (base_feature >= min_.size())
      bad_model(fmt::format("no scaling for base feature {}", base_feature));
  } else {
    auto it = std::lower_bound(ids_.begin(), ids_.end(), base_feature);
    if (it == ids_.end() || *it != base_feature)
      bad_model(fmt::format("no scaling for base feature {}", base_feature));
    slot = static_cast<size_t>(it - ids_.begin());
  }
  return scale_to_unit(raw_x, min_[slot], max_[slot]);
}

double ExpansionEvaluator::value(const ModelFeature& f, double raw_x) const {
  if (f.key.kind != map_.kind())
    bad_model(fmt::format("a {} feature in a {} model", feature_kind_name(f.key.kind),
                          feature_kind_name(map_.kind())));
  if (f.key.level >= map_.dim())
    bad_model(fmt::format("level {} beyond the map's {} components", f.key.level, map_.dim()));
  double x = scaled(f.key.ids[0], raw_x);
  return static_cast<double>(static_cast<float>(map_.component(x, f.key.level)));
}

double expansion_feature_value(const Model& model, const ModelFeature& f, double raw_x) {
  return ExpansionEvaluator(model).value(f, raw_x);
}

void describe_expansion_model(const ExpansionMap& map, std::vector<uint64_t> selected_ids,
                              const std::function<std::pair<float, float>(uint64_t)>& column_range, Model& model) {
  model.feature_kind = map.kind() == FeatureKind::kHik ? "hik" : "additive";
  if (map.kind() == FeatureKind::kHik) {
    model.levels = map.levels();
  } else {
    model.order = map.order();
    model.period = map.period();
    model.kernel = additive_kernel_name(map.kernel());
  }
  std::sort(selected_ids.begin(), selected_ids.end());
  model.scale_min.clear();
  model.scale_max.clear();
  for (uint64_t j : selected_ids) {
    const auto [lo, hi] = column_range(j);
    model.scale_min.push_back(lo);
    model.scale_max.push_back(hi);
  }
  model.scale_ids = std::move(selected_ids);
}

}  // namespace fgm
