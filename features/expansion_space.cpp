// HIK and additive-kernel expansion spaces (FGM Sections 6.1, 8.6): the
// worst-case analysis over groups of generated features, one group per base
// feature, s_g = ‖c_G‖² with c_{G,l} = Σ_i a_i φ_l(x'_ij), computed in one
// streamed pass over the base columns without writing the expansion.
//
// Implicit zeros: a row without an entry for j has x_ij = 0, scaled to
// x'_0 = scale_to_unit(0, min_j, max_j), which is > 0 when min_j < 0; then
// φ(x'_0) ≠ 0 and every such row contributes a_i·φ(x'_0):
//   c_G += φ(x'_0)·(Σ_all a_i − Σ_{rows with entries} a_i).
// Generated values are rounded to float32 (as the store's values and the
// selected-feature cache hold them), so scoring, the cache and prediction see
// the same numbers.
#include "features/expansion_space.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {
namespace {

ExpansionMap map_from_settings(const FeatureSpaceSettings& s) {
  if (s.kind == "hik") return ExpansionMap::hik(s.levels);
  auto kernel = parse_additive_kernel(s.kernel);
  if (!kernel)
    throw Error(ErrorKind::kConfig, msg::bad_enum("", "features.kernel", s.kernel, "chi2, intersection"));
  double period = s.period > 0 ? s.period : additive_default_period(*kernel, s.order);
  return ExpansionMap::additive(*kernel, s.order, period);
}

inline double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// Float32-rounded components [l0, l1) of φ(x) into out[0 .. l1−l0).
void components(const ExpansionMap& map, double x, uint32_t l0, uint32_t l1, double* scratch,
                double* out) {
  if (map.kind() == FeatureKind::kHik) {
    ExpansionMap::HikSplit s = map.hik_split(x);
    for (uint32_t l = l0; l < l1; ++l)
      out[l - l0] = l < s.full ? f32(map.hik_unit()) : (l == s.full ? f32(s.partial) : 0.0);
    return;
  }
  map.eval(x, scratch);
  for (uint32_t l = l0; l < l1; ++l) out[l - l0] = f32(scratch[l]);
}

}  // namespace

ExpansionSpace::ExpansionSpace(const ShardStore& store, const FeatureSpaceSettings& settings,
                               MemoryBudget& budget)
    : store_(store),
      map_(map_from_settings(settings)),
      n_features_(store.info().n_features),
      n_rows_(store.info().n_rows),
      selected_(&budget) {}

std::string ExpansionSpace::kind() const { return map_.kind() == FeatureKind::kHik ? "hik" : "additive"; }

double ExpansionSpace::dimension() const {
  return static_cast<double>(n_features_) * static_cast<double>(map_.dim());
}

void ExpansionSpace::mark_selected(uint64_t candidate) {
  if (!selected_.insert(candidate)) return;
  selected_ids_.push_back(candidate);
}

SpaceScores ExpansionSpace::score(const ScoringContext& ctx) {
  SpaceScores out;
  TopBCache global(ctx.B, ctx.budget);
  const double* a = ctx.a;
  const uint64_t B = ctx.B;
  const uint32_t D = map_.dim();
  const bool hik = map_.kind() == FeatureKind::kHik;
  const uint64_t n = n_rows_;
  double sum_a = 0;  // Σ_all a_i, for the implicit-zero rows
  for (uint64_t i = 0; i < n; ++i) sum_a += a[i];
  const double unit = f32(map_.hik_unit());

  out.pass = stream_blocks<TopBCache>(
      *ctx.stream, *ctx.blocks, hik ? "scoring hik groups" : "scoring additive groups",
      [&](const BlockRef&, const ColumnBlock& tiled) {
        CscScratch merged;  // reserved by the stream (CscBytes)
        const CscColumns block = csc_columns(tiled, merged);
        TopBCache local(B, ctx.budget);
        std::vector<double> c(D), phi(D), scratch(D);
        // HIK: below[m] = Σ a_i over entries whose first m components are full;
        // partial[l] = Σ a_i·φ_l over entries whose component l is partial.
        std::vector<double> below(hik ? D + 1 : 0), partial(hik ? D : 0);
        for (uint64_t k = 0; k < block.column_count; ++k) {
          const uint64_t j = block.column_ids[k];
          const uint64_t begin = block.col_ptr[k], end = block.col_ptr[k + 1];
          const double lo = block.col_min[k], hi = block.col_max[k];
          const double x0 = scale_to_unit(0.0, lo, hi);
          const bool implicit = x0 > 0 && end - begin < n;
          if (begin == end && !implicit) continue;
          if (selected_.test(j)) continue;
          double sum_entries = 0;
          if (hik) {
            std::fill(below.begin(), below.end(), 0.0);
            std::fill(partial.begin(), partial.end(), 0.0);
            for (uint64_t p = begin; p < end; ++p) {
              const double ai = a[block.row_ids[p]];
              sum_entries += ai;
              ExpansionMap::HikSplit s = map_.hik_split(scale_to_unit(block.values[p], lo, hi));
              below[s.full] += ai;
              if (s.full < D) partial[s.full] += ai * f32(s.partial);
            }
            double above = 0;  // Σ a_i over entries with full > l
            for (uint32_t l = D; l-- > 0;) {
              above += below[l + 1];
              c[l] = unit * above + partial[l];
            }
          } else {
            std::fill(c.begin(), c.end(), 0.0);
            float last = 0;  // φ of the previous entry's value is reused (binary, count data)
            bool have_last = false;
            for (uint64_t p = begin; p < end; ++p) {
              const double ai = a[block.row_ids[p]];
              sum_entries += ai;
              if (!have_last || block.values[p] != last) {
                components(map_, scale_to_unit(block.values[p], lo, hi), 0, D, scratch.data(), phi.data());
                last = block.values[p];
                have_last = true;
              }
              for (uint32_t l = 0; l < D; ++l) c[l] += ai * phi[l];
            }
          }
          if (implicit) {
            const double rest = sum_a - sum_entries;
            components(map_, x0, 0, D, scratch.data(), phi.data());
            for (uint32_t l = 0; l < D; ++l) c[l] += phi[l] * rest;
          }
          double s = 0;
          for (uint32_t l = 0; l < D; ++l) s += c[l] * c[l];
          if (!(s > 0) || !local.may_admit(s)) continue;
          local.offer({s, j});
        }
        return local;
      },
      [&](TopBCache&& local) { global.merge(local); }, CscBytes(ctx.store->info()));
  out.candidates_scored = n_features_ * D;
  out.top = global.take_sorted(&out.top_memory);
  return out;
}

void ExpansionSpace::materialize(const ShardStore& store, uint64_t candidate, SelectedFeatureCache& cache) {
  store.read_column(candidate, rows_, values_);
  const double lo = store.column_min(candidate), hi = store.column_max(candidate);
  const double x0 = scale_to_unit(0.0, lo, hi);
  const uint64_t n = n_rows_;
  const bool dense = x0 > 0 && rows_.size() < n;
  const uint32_t D = map_.dim();
  constexpr uint32_t kChunk = 16;  // components built per sweep over the column
  std::vector<double> scratch(D), phi(kChunk), phi0(kChunk);
  std::vector<std::vector<uint32_t>> col_rows(std::min(kChunk, D));
  std::vector<std::vector<float>> col_vals(col_rows.size());
  FeatureKey key;
  key.kind = map_.kind();
  key.ids[0] = candidate;
  key.group = candidate;
  for (uint32_t l0 = 0; l0 < D; l0 += kChunk) {
    const uint32_t l1 = std::min(D, l0 + kChunk), w = l1 - l0;
    for (uint32_t t = 0; t < w; ++t) {
      col_rows[t].clear();
      col_vals[t].clear();
    }
    auto push = [&](uint32_t row, const double* v) {
      for (uint32_t t = 0; t < w; ++t) {
        const float f = static_cast<float>(v[t]);
        if (f == 0) continue;  // columns stay sparse
        col_rows[t].push_back(row);
        col_vals[t].push_back(f);
      }
    };
    if (dense) {
      components(map_, x0, l0, l1, scratch.data(), phi0.data());
      size_t p = 0;
      for (uint64_t i = 0; i < n; ++i) {
        if (p < rows_.size() && rows_[p] == i) {
          components(map_, scale_to_unit(values_[p], lo, hi), l0, l1, scratch.data(), phi.data());
          push(static_cast<uint32_t>(i), phi.data());
          ++p;
        } else {
          push(static_cast<uint32_t>(i), phi0.data());
        }
      }
    } else {
      for (size_t p = 0; p < rows_.size(); ++p) {
        components(map_, scale_to_unit(values_[p], lo, hi), l0, l1, scratch.data(), phi.data());
        push(rows_[p], phi.data());
      }
    }
    for (uint32_t t = 0; t < w; ++t) {
      if (col_rows[t].empty()) continue;  // an all-zero component can carry no weight
      key.level = l0 + t;
      cache.add_column(key, col_rows[t], col_vals[t]);
    }
  }
}

void ExpansionSpace::describe(Model& model) const {
  describe_expansion_model(map_, selected_ids_,
                           [&](uint64_t j) { return std::pair{store_.column_min(j), store_.column_max(j)}; }, model);
}

}  // namespace fgm
