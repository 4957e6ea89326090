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
//
// Over partitions, by column ranges (docs/distributed.md, "poly-2 and kernel
// spaces"): the global column ranges (min/max over partitions, once per run,
// exchanged with each column's owner), then per pass each partition's sparse
// component sums, one reduce-scatter in the partition tree (rank r sums its
// id range), s_j = Σ_l c_{j,l}², its range's top-B, and one allgather of the
// K lists with the candidates' ranges. Nothing m-sized.
#include "features/expansion_space.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/messages.h"
#include "core/partition_sum.h"

namespace fgm {
namespace {

// The map of settings.kind (hik or additive) with its parameters; a config
// error naming features.kernel for an unknown kernel.
ExpansionMap expansion_map_from_settings(const FeatureSpaceSettings& s) {
  if (s.kind == "hik") return ExpansionMap::hik(s.levels);
  auto kernel = parse_additive_kernel(s.kernel);
  if (!kernel)
    throw Error(ErrorKind::kConfig, msg::bad_enum("", "features.kernel", s.kernel, "chi2, intersection"));
  double period = s.period > 0 ? s.period : additive_default_period(*kernel, s.order);
  return ExpansionMap::additive(*kernel, s.order, period);
}

inline double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// φ(x), its dim() components float32-rounded, into out (`scratch`: dim() doubles).
void expansion_components(const ExpansionMap& map, double x, double* scratch, double* out) {
  const uint32_t D = map.dim();
  if (map.kind() == FeatureKind::kHik) {
    ExpansionMap::HikSplit s = map.hik_split(x);
    for (uint32_t l = 0; l < D; ++l) out[l] = l < s.full ? f32(map.hik_unit()) : (l == s.full ? f32(s.partial) : 0.0);
    return;
  }
  map.eval(x, scratch);
  for (uint32_t l = 0; l < D; ++l) out[l] = f32(scratch[l]);
}

// Buffers of expansion_column_sums, reused from column to column.
struct ExpansionScratch {
  std::vector<double> below, partial, phi, scratch;
};

// c_l = Σ_e a_e φ_l(x'_e) (l < dim(), into c) over the entries of column k
// of `block`, x'_e = scale_to_unit(x_e, lo, hi), in entry order; `sum_entries`
// = Σ_e a_e. The same sums on one store and on a partition.
// HIK: below[f] = Σ a_i over entries whose first f components are full,
// partial[l] = Σ a_i·φ_l over entries whose component l is partial; c_l from
// their suffix sums. Additive: φ of the previous entry's value is reused
// (binary, count data).
void expansion_column_sums(const ExpansionMap& map, const CscColumns& block, uint64_t k, const double* a, double lo,
                           double hi, ExpansionScratch& s, double* c, double& sum_entries) {
  const uint32_t D = map.dim();
  const uint64_t begin = block.col_ptr[k], end = block.col_ptr[k + 1];
  sum_entries = 0;
  if (map.kind() == FeatureKind::kHik) {
    const double unit = f32(map.hik_unit());
    s.below.assign(D + 1, 0.0);
    s.partial.assign(D, 0.0);
    for (uint64_t e = begin; e < end; ++e) {
      const double ai = a[block.row_ids[e]];
      sum_entries += ai;
      ExpansionMap::HikSplit split = map.hik_split(scale_to_unit(block.values[e], lo, hi));
      s.below[split.full] += ai;
      if (split.full < D) s.partial[split.full] += ai * f32(split.partial);
    }
    double above = 0;  // Σ a_i over entries with full > l
    for (uint32_t l = D; l-- > 0;) {
      above += s.below[l + 1];
      c[l] = unit * above + s.partial[l];
    }
    return;
  }
  s.phi.resize(D);
  s.scratch.resize(D);
  std::fill(c, c + D, 0.0);
  for (uint64_t e = begin; e < end; ++e) {
    const double ai = a[block.row_ids[e]];
    sum_entries += ai;
    if (e == begin || block.values[e] != block.values[e - 1])
      expansion_components(map, scale_to_unit(block.values[e], lo, hi), s.scratch.data(), s.phi.data());
    for (uint32_t l = 0; l < D; ++l) c[l] += ai * s.phi[l];
  }
}

// The partition's non-empty columns, increasing, each with its min/max over
// the partition's rows (implicit zeros included): the blocks' col_min/col_max,
// what ShardStore::column_min/max return, read block by block (one stored
// block at a time, the buffer reserved from `budget`) instead of one verified
// read per column.
ColumnRanges partition_column_ranges(const ShardStore& store, MemoryBudget& budget) {
  ColumnRanges out;
  BlockBuffer buffer;
  Reservation buffer_memory = budget.reserve(0, "a block of a partition's column directory");
  for (const BlockRef& ref : store.plan_blocks(0)) {  // one stored block at a time
    if (ref.read_bytes > buffer_memory.bytes()) buffer_memory.resize(ref.read_bytes);
    const ColumnBlock block = store.read_block(ref, buffer);
    out.ids.insert(out.ids.end(), block.column_ids, block.column_ids + block.column_count);
    out.lo.insert(out.lo.end(), block.col_min, block.col_min + block.column_count);
    out.hi.insert(out.hi.end(), block.col_max, block.col_max + block.column_count);
  }
  return out;
}

// One block's component sums of its unselected non-empty columns.
struct ExpansionColumns {
  std::vector<uint64_t> ids, count;
  std::vector<double> sum_a, c;  // c: dim() per column
};


// Per base feature j not `selected`, the dim() component sums
// c_{j,l} = Σ_i a_i φ_l(x'_ij) over the partition's rows, x'_ij scaled by the
// GLOBAL column range (`ranges`, which must hold every non-empty column of the
// partition and every id of `raised_zero`); a row without an entry contributes
// a_i·φ(x'_0) when x'_0 = scale_to_unit(0, lo, hi) > 0, which is the case
// exactly for the ids of `raised_zero` (increasing; they get sums on every
// partition, with or without entries). Values are float32-rounded as in
// ExpansionSpace. Sparse: keys j·dim() + l, increasing, nonzero sums only
// (16 bytes each, reserved by the caller); the additions are those of a dense
// m·dim() vector, whose other entries are exact zeros.
SparseSums expansion_partition_sums(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                    const ExpansionMap& map, const ColumnRanges& ranges,
                                    const std::vector<uint64_t>& raised_zero,
                                    const std::function<bool(uint64_t)>& selected, PassStats* pass) {
  const uint64_t n = stream.store().info().n_rows;
  const uint32_t D = map.dim();
  double sum_a = 0;  // Σ a_i over the partition, for the rows without an entry
  for (uint64_t i = 0; i < n; ++i) sum_a += a[i];
  ExpansionColumns all;  // the partition's columns, in id order
  PassStats p = stream_blocks<ExpansionColumns>(
      stream, blocks, map.kind() == FeatureKind::kHik ? "scoring hik groups" : "scoring additive groups",
      [&](const BlockRef&, const ColumnBlock& tiled) {
        CscScratch merged;
        const CscColumns block = csc_columns(tiled, merged);
        ExpansionColumns o;
        std::vector<double> c(D);
        ExpansionScratch scratch;
        for (uint64_t k = 0; k < block.column_count; ++k) {
          const uint64_t j = block.column_ids[k];
          if (block.col_ptr[k] == block.col_ptr[k + 1] || selected(j)) continue;
          const size_t at = ranges.find(j);
          if (at == ranges.ids.size())
            throw Error(ErrorKind::kInternal, "hik/additive: no global range for column " + std::to_string(j));
          double s_entries = 0;
          expansion_column_sums(map, block, k, a, ranges.lo[at], ranges.hi[at], scratch, c.data(), s_entries);
          o.ids.push_back(j);
          o.count.push_back(block.col_ptr[k + 1] - block.col_ptr[k]);
          o.sum_a.push_back(s_entries);
          o.c.insert(o.c.end(), c.begin(), c.end());
        }
        return o;
      },
      [&](ExpansionColumns&& o) {
        if (!o.ids.empty() && !all.ids.empty() && o.ids.front() <= all.ids.back())
          throw Error(ErrorKind::kInternal, "hik/additive sums: blocks of a partition out of column order");
        all.ids.insert(all.ids.end(), o.ids.begin(), o.ids.end());
        all.count.insert(all.count.end(), o.count.begin(), o.count.end());
        all.sum_a.insert(all.sum_a.end(), o.sum_a.begin(), o.sum_a.end());
        all.c.insert(all.c.end(), o.c.begin(), o.c.end());
      },
      CscBytes(stream.store().info()));
  if (pass) *pass += p;
  // The columns with entries and those of `raised_zero` (x = 0 scales to
  // x'_0 > 0: every row without an entry adds a_i·φ(x'_0)), merged by id. The
  // additions are those of the dense vector: its entry c_l, then + φ_l·rest.
  SparseSums out;
  std::vector<double> v(D), phi(D), scratch(D);
  size_t k = 0, z = 0;
  while (k < all.ids.size() || z < raised_zero.size()) {
    const uint64_t j = k < all.ids.size() && (z == raised_zero.size() || all.ids[k] <= raised_zero[z])
                           ? all.ids[k]
                           : raised_zero[z];
    const bool has_entries = k < all.ids.size() && all.ids[k] == j;
    const bool raised = z < raised_zero.size() && raised_zero[z] == j;
    const uint64_t entries = has_entries ? all.count[k] : 0;
    const double sum_entries = has_entries ? all.sum_a[k] : 0.0;
    if (has_entries) std::copy(all.c.begin() + static_cast<std::ptrdiff_t>(k * D),
                               all.c.begin() + static_cast<std::ptrdiff_t>((k + 1) * D), v.begin());
    else std::fill(v.begin(), v.end(), 0.0);
    k += has_entries;
    z += raised;
    if (selected(j)) continue;
    if (raised && entries < n) {
      const size_t at = ranges.find(j);
      if (at == ranges.ids.size())
        throw Error(ErrorKind::kInternal, "hik/additive: no global range for column " + std::to_string(j));
      const double rest = sum_a - sum_entries;
      expansion_components(map, scale_to_unit(0.0, ranges.lo[at], ranges.hi[at]), scratch.data(), phi.data());
      for (uint32_t l = 0; l < D; ++l) v[l] += phi[l] * rest;
    }
    for (uint32_t l = 0; l < D; ++l)
      if (v[l] != 0.0) {
        out.keys.push_back(j * D + l);
        out.values.push_back(v[l]);
      }
  }
  return out;
}

// The store's columns of the dim() components of base feature j (all of
// them, in level order; a component may be empty on this store), x_j scaled
// by the range [lo, hi], values float32-rounded.
std::vector<GeneratedColumn> expansion_columns(const ShardStore& store, const ExpansionMap& map, uint64_t j, float lo,
                                               float hi) {
  const uint32_t D = map.dim();
  const uint64_t n = store.info().n_rows;
  std::vector<uint32_t> col_rows;
  std::vector<float> col_values;
  store.read_column(j, col_rows, col_values);
  std::vector<GeneratedColumn> out(D);
  for (uint32_t l = 0; l < D; ++l) {
    out[l].key.kind = map.kind();
    out[l].key.ids[0] = j;
    out[l].key.group = j;
    out[l].key.level = l;
  }
  std::vector<double> phi(D), phi0(D), scratch(D);
  auto push = [&](uint32_t row, const double* v) {
    for (uint32_t l = 0; l < D; ++l) {
      const float f = static_cast<float>(v[l]);
      if (f == 0) continue;  // columns stay sparse
      out[l].rows.push_back(row);
      out[l].values.push_back(f);
    }
  };
  const double x0 = scale_to_unit(0.0, lo, hi);
  if (x0 > 0 && col_rows.size() < n) {
    expansion_components(map, x0, scratch.data(), phi0.data());
    size_t p = 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (p < col_rows.size() && col_rows[p] == i) {
        expansion_components(map, scale_to_unit(col_values[p], lo, hi), scratch.data(), phi.data());
        push(static_cast<uint32_t>(i), phi.data());
        ++p;
      } else {
        push(static_cast<uint32_t>(i), phi0.data());
      }
    }
    return out;
  }
  for (size_t p = 0; p < col_rows.size(); ++p) {
    expansion_components(map, scale_to_unit(col_values[p], lo, hi), scratch.data(), phi.data());
    push(col_rows[p], phi.data());
  }
  return out;
}

}  // namespace

size_t ColumnRanges::find(uint64_t id) const {
  const auto at = std::lower_bound(ids.begin(), ids.end(), id);
  return at != ids.end() && *at == id ? static_cast<size_t>(at - ids.begin()) : ids.size();
}

ExpansionSpace::ExpansionSpace(const SpaceRows& rows, const FeatureSpaceSettings& settings, MemoryBudget& budget)
    : store_(rows.store),
      partitions_(rows.partitions),
      budget_(budget),
      map_(expansion_map_from_settings(settings)),
      n_features_(rows.n_features()),
      n_rows_(rows.n_rows()),
      selected_(&budget) {
  if (!partitions_) return;
  if (n_features_ > std::numeric_limits<uint64_t>::max() / map_.dim())
    throw Error(ErrorKind::kConfig,
                msg::out_of_range("", settings.kind == "hik" ? "features.levels" : "features.order",
                                  std::to_string(settings.kind == "hik" ? settings.levels : settings.order),
                                  fmt::format("at most 2^64 component sums ({} base features)", n_features_)));
  exchange_ranges();
}

std::string ExpansionSpace::kind() const { return map_.kind() == FeatureKind::kHik ? "hik" : "additive"; }

double ExpansionSpace::dimension() const {
  return static_cast<double>(n_features_) * static_cast<double>(map_.dim());
}


SpaceScores ExpansionSpace::score(const ScoringContext& ctx) {
  if (partitions_) return score_partitions(ctx);
  SpaceScores out;
  TopBCache global(ctx.B, ctx.budget);
  const double* a = ctx.a;
  const uint32_t D = map_.dim();
  double sum_a = 0;  // Σ_all a_i, for the implicit-zero rows
  for (uint64_t i = 0; i < n_rows_; ++i) sum_a += a[i];
  out.pass = stream_blocks<TopBCache>(
      *ctx.stream, *ctx.blocks, map_.kind() == FeatureKind::kHik ? "scoring hik groups" : "scoring additive groups",
      [&](const BlockRef&, const ColumnBlock& tiled) {
        CscScratch merged;  // reserved by the stream (CscBytes)
        const CscColumns block = csc_columns(tiled, merged);
        TopBCache local(ctx.B, ctx.budget);
        std::vector<double> c(D), phi(D), scratch(D);
        ExpansionScratch sums;
        for (uint64_t k = 0; k < block.column_count; ++k) {
          const uint64_t j = block.column_ids[k];
          const uint64_t entries = block.col_ptr[k + 1] - block.col_ptr[k];
          // One block holds the whole column: its min/max are the column's.
          const double lo = block.col_min[k], hi = block.col_max[k];
          const double x0 = scale_to_unit(0.0, lo, hi);
          const bool implicit = x0 > 0 && entries < n_rows_;
          if ((entries == 0 && !implicit) || selected_.test(j)) continue;
          double sum_entries = 0;
          expansion_column_sums(map_, block, k, a, lo, hi, sums, c.data(), sum_entries);
          if (implicit) {
            const double rest = sum_a - sum_entries;
            expansion_components(map_, x0, scratch.data(), phi.data());
            for (uint32_t l = 0; l < D; ++l) c[l] += phi[l] * rest;
          }
          double s = 0;
          for (uint32_t l = 0; l < D; ++l) s += c[l] * c[l];
          if (s > 0 && local.may_admit(s)) local.offer({s, j});
        }
        return local;
      },
      [&](TopBCache&& local) { global.merge(local); }, CscBytes(ctx.store->info()));
  out.candidates_scored = n_features_ * D;
  out.top = global.take_sorted(&out.top_memory);
  return out;
}

std::vector<GeneratedColumn> ExpansionSpace::columns(const ShardStore& store, uint64_t candidate) {
  const RangeRecord range = selected_range(candidate);
  return expansion_columns(store, map_, candidate, range.lo, range.hi);
}

void ExpansionSpace::describe(Model& model) const {
  describe_expansion_model(map_, selected_ids_,
                           [&](uint64_t j) {
                             const RangeRecord r = selected_range(j);
                             return std::pair{r.lo, r.hi};
                           },
                           model);
}

namespace {

using RangeRecord = ExpansionSpace::RangeRecord;
bool id_before(const RangeRecord& x, const RangeRecord& y) { return x.id < y.id; }

template <class T>
void append(std::vector<uint8_t>& out, const T* data, size_t count) {
  const auto* b = reinterpret_cast<const uint8_t*>(data);
  out.insert(out.end(), b, b + count * sizeof(T));
}

}  // namespace

ExpansionSpace::RangeRecord ExpansionSpace::selected_range(uint64_t j) const {
  if (store_) return {j, store_->column_min(j), store_->column_max(j)};
  const auto at = std::lower_bound(selected_ranges_.begin(), selected_ranges_.end(), RangeRecord{j}, id_before);
  if (at == selected_ranges_.end() || at->id != j)
    throw Error(ErrorKind::kInternal, "hik/additive: no range for selected feature " + std::to_string(j));
  return *at;
}

ExpansionSpace::RangeRecord ExpansionSpace::known_range(uint64_t j) const {
  const size_t at = ranges_.find(j);
  return at == ranges_.ids.size() ? RangeRecord{j} : RangeRecord{j, ranges_.lo[at], ranges_.hi[at]};
}

// The global range of each column, min/max over the partitions with implicit
// zeros (exact, so only a fold order that is the same for every K matters:
// ranks in order, each over its partitions in order, as one process folds its
// partitions). By column ranges, never m-sized: each rank sends the owner of
// each of its non-empty columns its range over its partitions (a rank without
// the column would send 0 and 0, so the owner folds in 0 for it); the owner
// returns the global range of what each rank asked for, and to every rank the
// columns of its range whose zero scales above 0 (every partition sums those).
// Two alltoallv, in the phase that calls the constructor.
void ExpansionSpace::exchange_ranges() {
  const int K = partitions_->comm().size();
  range_memory_ = budget_.reserve(0, "hik/additive column ranges", "use more ranks (more, smaller partitions)");
  // Each own partition's non-empty columns with their min/max, then per
  // column of any of them the fold over the partitions in order (an empty
  // column's min/max is 0 and 0).
  std::vector<ColumnRanges> partitions;
  uint64_t listed = 0;
  for (size_t q = 0; q < partitions_->size(); ++q) {
    partitions.push_back(partition_column_ranges(partitions_->store(q), budget_));
    listed += partitions.back().ids.size();
    range_memory_.resize(16 * listed);
  }
  std::vector<uint64_t> mine;
  for (const ColumnRanges& p : partitions) {
    std::vector<uint64_t> both;
    std::set_union(mine.begin(), mine.end(), p.ids.begin(), p.ids.end(), std::back_inserter(both));
    mine.swap(both);
  }
  range_memory_.resize(16 * listed + 24 * mine.size());
  std::vector<std::vector<uint8_t>> parts(static_cast<size_t>(K));
  std::vector<std::vector<uint64_t>> sent(static_cast<size_t>(K));  // ids sent to each owner, in order
  std::vector<size_t> next(partitions.size(), 0);
  for (uint64_t j : mine) {
    RangeRecord r{j, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    for (size_t q = 0; q < partitions.size(); ++q) {
      const ColumnRanges& p = partitions[q];
      const bool listed_here = next[q] < p.ids.size() && p.ids[next[q]] == j;
      r.lo = std::min(r.lo, listed_here ? p.lo[next[q]] : 0.0f);
      r.hi = std::max(r.hi, listed_here ? p.hi[next[q]] : 0.0f);
      next[q] += listed_here;
    }
    const auto d = static_cast<size_t>(rank_of_id(j, n_features_, K));
    append(parts[d], &r, 1);
    sent[d].push_back(j);
  }
  std::vector<ColumnRanges>().swap(partitions);
  std::vector<size_t> sizes;
  std::vector<uint8_t> received = partitions_->comm().alltoallv(parts, &sizes);
  std::vector<std::vector<uint8_t>>().swap(parts);
  std::vector<std::vector<uint64_t>> asked;
  const std::vector<RangeRecord> owned = owned_ranges(received, sizes, asked);
  std::vector<uint8_t>().swap(received);
  // Back: each asker's ranges in its order (8 bytes each), then the raised zeros of this range.
  std::vector<RangeRecord> raised;
  for (const RangeRecord& r : owned)
    if (scale_to_unit(0.0, r.lo, r.hi) > 0) raised.push_back(r);
  parts.assign(static_cast<size_t>(K), {});
  for (int s = 0; s < K; ++s) {
    for (uint64_t j : asked[static_cast<size_t>(s)]) {
      const RangeRecord& r = *std::lower_bound(owned.begin(), owned.end(), RangeRecord{j}, id_before);
      const float lohi[2] = {r.lo, r.hi};
      append(parts[static_cast<size_t>(s)], lohi, 2);
    }
    append(parts[static_cast<size_t>(s)], raised.data(), raised.size());
  }
  received = partitions_->comm().alltoallv(parts, &sizes);
  std::vector<std::vector<uint8_t>>().swap(parts);
  std::vector<RangeRecord> table = owned;
  size_t at = 0;
  for (int d = 0; d < K; ++d) {
    const size_t end = at + sizes[static_cast<size_t>(d)];
    for (uint64_t j : sent[static_cast<size_t>(d)]) {
      float lohi[2];
      std::memcpy(lohi, received.data() + at, sizeof lohi);
      at += sizeof lohi;
      table.push_back({j, lohi[0], lohi[1]});
    }
    for (; at < end; at += sizeof(RangeRecord)) {
      RangeRecord r;
      std::memcpy(&r, received.data() + at, sizeof r);
      table.push_back(r);
      raised_zero_.push_back(r.id);  // increasing: the ranges are, and each owner's list is
    }
  }
  std::stable_sort(table.begin(), table.end(), id_before);
  table.erase(std::unique(table.begin(), table.end(),
                          [](const RangeRecord& x, const RangeRecord& y) { return x.id == y.id; }),
              table.end());
  for (const RangeRecord& r : table) {
    ranges_.ids.push_back(r.id);
    ranges_.lo.push_back(r.lo);
    ranges_.hi.push_back(r.hi);
  }
  range_memory_.resize(16 * ranges_.ids.size() + 8 * raised_zero_.size());
}

// The global ranges of the columns of this rank's range that some rank has,
// folded over the ranks in order (0 and 0 from a rank that sent nothing);
// `asked[s]`: the ids rank s sent, in its order.
std::vector<ExpansionSpace::RangeRecord> ExpansionSpace::owned_ranges(const std::vector<uint8_t>& received,
                                                            const std::vector<size_t>& sizes,
                                                            std::vector<std::vector<uint64_t>>& asked) const {
  const int K = partitions_->comm().size();
  struct FromRank {
    RangeRecord range;
    int rank;
  };
  std::vector<FromRank> all;
  asked.assign(static_cast<size_t>(K), {});
  size_t at = 0;
  for (int s = 0; s < K; ++s)
    for (const size_t end = at + sizes[static_cast<size_t>(s)]; at < end; at += sizeof(RangeRecord)) {
      FromRank f{{}, s};
      std::memcpy(&f.range, received.data() + at, sizeof f.range);
      asked[static_cast<size_t>(s)].push_back(f.range.id);
      all.push_back(f);
    }
  std::sort(all.begin(), all.end(), [](const FromRank& x, const FromRank& y) {
    return x.range.id != y.range.id ? x.range.id < y.range.id : x.rank < y.rank;
  });
  std::vector<RangeRecord> owned;
  for (size_t k = 0; k < all.size();) {
    RangeRecord r{all[k].range.id, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
    for (int s = 0; s < K; ++s) {
      const bool has = k < all.size() && all[k].range.id == r.id && all[k].rank == s;
      r.lo = std::min(r.lo, has ? all[k].range.lo : 0.0f);
      r.hi = std::max(r.hi, has ? all[k].range.hi : 0.0f);
      k += has;
    }
    owned.push_back(r);
  }
  return owned;
}

// s_j = Σ_l c_{j,l}² by column ranges: each partition's sparse component sums
// (its non-empty and raised-zero columns), one reduce-scatter in the partition
// tree (rank r gets the keys j·D + l of its features [⌊r·m/K⌋, ⌊(r+1)·m/K⌋)),
// its range's top-B, and one allgather of the K lists with the candidates'
// ranges (ties to the smaller id).
SpaceScores ExpansionSpace::score_partitions(const ScoringContext& ctx) {
  const std::vector<PartitionScoringInput>& parts = ctx.parts;
  const uint64_t B = ctx.B;
  SpaceScores out;
  const uint64_t D = map_.dim();
  Reservation memory = budget_.reserve(0, "hik/additive component sums of a distributed scoring pass",
                                       "use more ranks (more, smaller partitions), a smaller "
                                       "features.levels/features.order, or more memory per rank");
  const std::vector<ColumnSpans> wanted = rank_key_ranges(n_features_, partitions_->comm().size(), D);
  PassStats pass;
  const auto is_selected = [&](uint64_t j) { return selected_.test(j); };
  const SparseSums sums = partitions_->reduce_scatter(
      [&](size_t q) {
        const PartitionScoringInput& in = parts[q];
        return expansion_partition_sums(*in.stream, *in.blocks, in.a, map_, ranges_, raised_zero_, is_selected, &pass);
      },
      wanted, &memory);
  out.pass.bytes_streamed = pass.bytes_streamed;
  memory.resize(16 * sums.keys.size());
  TopBCache range_top(B, &budget_);
  for (size_t e = 0; e < sums.keys.size();) {
    const uint64_t j = sums.keys[e] / D;
    double s = 0;  // Σ_l c_l² in level order (an absent component is an exact zero: s + 0 = s)
    for (; e < sums.keys.size() && sums.keys[e] / D == j; ++e) s += sums.values[e] * sums.values[e];
    if (s > 0 && range_top.may_admit(s) && !selected_.test(j)) range_top.offer({s, j});
  }
  Reservation range_top_memory;
  const std::vector<ScoredCandidate> mine = range_top.take_sorted(&range_top_memory);
  std::vector<RangeRecord> mine_ranges;
  for (const ScoredCandidate& c : mine) mine_ranges.push_back(known_range(c.id));
  auto [tops, ranges] = allgather_lists(partitions_->comm(), mine, mine_ranges);
  TopBCache top(B, &budget_);
  for (const ScoredCandidate& c : tops) top.offer(c);
  std::sort(ranges.begin(), ranges.end(), id_before);
  top_ranges_ = std::move(ranges);
  out.candidates_scored = n_features_ * D;
  out.top = top.take_sorted(&out.top_memory);
  return out;
}

// The range of a new selection comes with the pass that chose it; a candidate
// chosen before this run (a resumed checkpoint) is asked of its range's owner
// (one allgather; every rank calls mark_selected with the same candidates).
void ExpansionSpace::mark_selected(uint64_t candidate) {
  if (!selected_.insert(candidate)) return;
  selected_ids_.push_back(candidate);
  if (store_) return;  // the single store's ranges are its columns'
  RangeRecord range;
  const auto at = std::lower_bound(top_ranges_.begin(), top_ranges_.end(), RangeRecord{candidate}, id_before);
  if (at != top_ranges_.end() && at->id == candidate) {
    range = *at;
  } else {
    std::vector<RangeRecord> mine;
    Communicator& comm = partitions_->comm();
    if (rank_of_id(candidate, n_features_, comm.size()) == comm.rank()) mine.push_back(known_range(candidate));
    const std::vector<RangeRecord> all = allgather_lists(partitions_->comm(), mine, std::vector<char>{}).first;
    if (all.size() != 1) throw Error(ErrorKind::kInternal, "hik/additive: no owner for a selected feature's range");
    range = all.front();
  }
  selected_ranges_.insert(
      std::lower_bound(selected_ranges_.begin(), selected_ranges_.end(), range, id_before), range);
}


}  // namespace fgm
