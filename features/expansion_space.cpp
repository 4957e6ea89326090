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
#include "features/partition_spaces.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/messages.h"

namespace fgm {

ExpansionMap expansion_map_from_settings(const FeatureSpaceSettings& s) {
  if (s.kind == "hik") return ExpansionMap::hik(s.levels);
  auto kernel = parse_additive_kernel(s.kernel);
  if (!kernel)
    throw Error(ErrorKind::kConfig, msg::bad_enum("", "features.kernel", s.kernel, "chi2, intersection"));
  double period = s.period > 0 ? s.period : additive_default_period(*kernel, s.order);
  return ExpansionMap::additive(*kernel, s.order, period);
}

namespace {
inline double f32(double v) { return static_cast<double>(static_cast<float>(v)); }
}  // namespace

ExpansionSpace::ExpansionSpace(const ShardStore& store, const FeatureSpaceSettings& settings,
                               MemoryBudget& budget)
    : store_(store),
      map_(expansion_map_from_settings(settings)),
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
                expansion_components(map_, scale_to_unit(block.values[p], lo, hi), scratch.data(), phi.data());
                last = block.values[p];
                have_last = true;
              }
              for (uint32_t l = 0; l < D; ++l) c[l] += ai * phi[l];
            }
          }
          if (implicit) {
            const double rest = sum_a - sum_entries;
            expansion_components(map_, x0, scratch.data(), phi.data());
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

std::vector<GeneratedColumn> ExpansionSpace::columns(const ShardStore& store, uint64_t candidate) {
  return expansion_columns(store, map_, candidate, store.column_min(candidate), store.column_max(candidate));
}

void ExpansionSpace::describe(Model& model) const {
  describe_expansion_model(map_, selected_ids_,
                           [&](uint64_t j) { return std::pair{store_.column_min(j), store_.column_max(j)}; }, model);
}

}  // namespace fgm
