#include "features/partition_spaces.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "core/error.h"
#include "core/simd/simd.h"
#include "features/pair_sum_table.h"
#include "features/poly2_space.h"

namespace fgm {
namespace {

inline double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

void add_pass(PassStats* total, const PassStats& p) {
  if (!total) return;
  total->blocks += p.blocks;
  total->bytes_streamed += p.bytes_streamed;
  total->seconds += p.seconds;
}

// Exact pair sums are keyed by (active index p) << 32 | q, p < q (PairSumTable).

struct ActiveEntry {
  uint32_t index;  // active index
  float value;
};

// The active columns' entries of one block, column by column.
struct BlockEntries {
  Reservation memory;
  std::vector<uint32_t> rows;
  std::vector<ActiveEntry> entries;
};

// The active columns' entries of the partition in row-major form: row i's
// entries are entries[row_ptr[i], row_ptr[i+1]), by increasing active index
// (decreasing bound). A counting sort by row, then a sort of each row's few
// entries: O(nnz) where one sort of all entries cost a quarter of the pass.
struct ActiveRows {
  std::vector<uint64_t> row_ptr;
  std::vector<ActiveEntry> entries;
};

ActiveRows active_rows(const BlockStream& stream, const std::vector<BlockRef>& blocks, const Poly2ActiveSet& active,
                       MemoryBudget& budget, Reservation& memory, PassStats* pass) {
  const uint64_t n = stream.store().info().n_rows;
  // Active index of a base id: binary search in the ids sorted by id.
  std::vector<std::pair<uint32_t, uint32_t>> by_id(active.ids.size());
  for (size_t p = 0; p < active.ids.size(); ++p) by_id[p] = {active.ids[p], static_cast<uint32_t>(p)};
  std::sort(by_id.begin(), by_id.end());
  memory = budget.reserve(by_id.size() * sizeof(by_id[0]) + (n + 1) * sizeof(uint64_t),
                          "poly2 active entries of a partition", "use more ranks (more, smaller partitions)");
  std::vector<BlockEntries> per_block;
  PassStats p = stream_blocks<BlockEntries>(
      stream, blocks, "poly2 candidate pairs",
      [&](const BlockRef&, const ColumnBlock& block) {
        CscScratch scratch;
        const CscColumns cols = csc_columns(block, scratch);
        BlockEntries out;
        std::vector<std::pair<uint32_t, uint32_t>> found;  // (column position, active index)
        uint64_t count = 0;
        for (uint64_t k = 0; k < cols.column_count; ++k) {
          const uint64_t j = cols.column_ids[k];
          if (j >= (uint64_t{1} << 32)) continue;
          auto at = std::lower_bound(by_id.begin(), by_id.end(), std::make_pair(static_cast<uint32_t>(j), 0u));
          if (at == by_id.end() || at->first != j) continue;
          found.emplace_back(static_cast<uint32_t>(k), at->second);
          count += cols.col_ptr[k + 1] - cols.col_ptr[k];
        }
        out.memory = budget.reserve(count * (sizeof(uint32_t) + sizeof(ActiveEntry)), "poly2 active entries of a block");
        out.rows.reserve(count);
        out.entries.reserve(count);
        for (const auto& [k, index] : found)
          for (uint32_t e = cols.col_ptr[k]; e < cols.col_ptr[k + 1]; ++e) {
            out.rows.push_back(cols.row_ids[e]);
            out.entries.push_back({index, cols.values[e]});
          }
        return out;
      },
      [&](BlockEntries&& b) { per_block.push_back(std::move(b)); }, CscBytes(stream.store().info()));
  add_pass(pass, p);
  ActiveRows R;
  R.row_ptr.assign(n + 1, 0);
  for (const auto& b : per_block)
    for (uint32_t row : b.rows) ++R.row_ptr[row + 1];
  for (uint64_t i = 0; i < n; ++i) R.row_ptr[i + 1] += R.row_ptr[i];
  memory.resize(memory.bytes() + R.row_ptr[n] * sizeof(ActiveEntry));
  R.entries.resize(R.row_ptr[n]);
  std::vector<uint64_t> fill(R.row_ptr.begin(), R.row_ptr.end() - 1);
  for (auto& b : per_block) {
    for (size_t e = 0; e < b.rows.size(); ++e) R.entries[fill[b.rows[e]]++] = b.entries[e];
    b = BlockEntries();  // its memory back before the next block's copy grows the total
  }
  for (uint64_t i = 0; i < n; ++i)
    std::sort(R.entries.begin() + static_cast<std::ptrdiff_t>(R.row_ptr[i]),
              R.entries.begin() + static_cast<std::ptrdiff_t>(R.row_ptr[i + 1]),
              [](const ActiveEntry& x, const ActiveEntry& y) { return x.index < y.index; });
  return R;
}

}  // namespace

int rank_of_id(uint64_t j, uint64_t m, int ranks) {
  int d = static_cast<int>(static_cast<unsigned __int128>(j) * static_cast<unsigned>(ranks) / m);
  while (d + 1 < ranks && !column_range_of_rank(m, ranks, d).contains(j)) ++d;
  while (d > 0 && !column_range_of_rank(m, ranks, d).contains(j)) --d;
  return d;
}

std::vector<ColumnSpans> rank_key_ranges(uint64_t m, int ranks, uint64_t width) {
  std::vector<ColumnSpans> out;
  for (int d = 0; d < ranks; ++d) {
    ColumnSpans keys;
    for (const auto& [first, end] : column_range_of_rank(m, ranks, d).spans)
      keys.spans.emplace_back(first * width, end * width);
    out.push_back(std::move(keys));
  }
  return out;
}

SparseSums poly2_partition_moments(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                   PassStats* pass) {
  SparseSums out;
  const simd::Kernels& kernels = simd::kernels();
  PassStats p = stream_blocks<SparseSums>(
      stream, blocks, "poly2 single features",
      [&](const BlockRef&, const ColumnBlock& block) {
        CscScratch scratch;
        const CscColumns cols = csc_columns(block, scratch);
        SparseSums o;
        o.keys.resize(3 * cols.column_count);
        o.values.resize(3 * cols.column_count);
        for (uint64_t k = 0; k < cols.column_count; ++k) {
          const uint64_t begin = cols.col_ptr[k], end = cols.col_ptr[k + 1];
          double* m = o.values.data() + 3 * k;
          for (uint64_t r = 0; r < 3; ++r) o.keys[3 * k + r] = 3 * cols.column_ids[k] + r;
          if (end - begin < 8) simd::gather_moments_short(a, cols.row_ids + begin, cols.values + begin, end - begin, m);
          else kernels.gather_moments(a, cols.row_ids + begin, cols.values + begin, end - begin, m);
        }
        return o;
      },
      [&](SparseSums&& o) {
        if (!o.keys.empty() && !out.keys.empty() && o.keys.front() <= out.keys.back())
          throw Error(ErrorKind::kInternal, "poly2 moments: blocks of a partition out of column order");
        out.keys.insert(out.keys.end(), o.keys.begin(), o.keys.end());
        out.values.insert(out.values.end(), o.values.begin(), o.values.end());
      },
      CscBytes(stream.store().info()));
  add_pass(pass, p);
  return out;
}

SparseSums poly2_partition_pair_sums(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                     const Poly2ActiveSet& active, MemoryBudget& budget, PassStats* pass,
                                     uint64_t* pair_updates) {
  SparseSums out;
  if (active.ids.size() < 2) return out;
  Reservation rows_memory;
  const ActiveRows R = active_rows(stream, blocks, active, budget, rows_memory, pass);
  const double* bound = active.bound.data();
  const uint64_t n = R.row_ptr.size() - 1;
  // engine.threads workers; worker r sums the pairs whose first active index
  // p has p mod workers = r (interleaved: the heavy, high-bound features are
  // spread), each walking all rows in order into its own table. Every pair is
  // summed by one worker in row order, so its bits do not depend on the
  // worker count.
  const auto workers = static_cast<uint32_t>(std::max(1, stream.threads()));
  std::vector<std::vector<std::pair<uint64_t, double>>> found(workers);
  std::vector<uint64_t> updates(workers, 0);
  Reservation found_memory = budget.reserve(0, "poly2 candidate-pair partials");
  std::mutex found_mutex;
  tbb::task_arena arena(static_cast<int>(workers));
  arena.execute([&] {
    tbb::parallel_for(uint32_t{0}, workers, [&](uint32_t r) {
      PairSumTable table(0, budget, "poly2 candidate-pair accumulators of a partition",
                         "use more ranks (more, smaller partitions), a smaller fgm.B or fewer engine.threads");
      // Row by row (rows in order); a row's entries are by decreasing bound,
      // so p's candidate partners are a prefix.
      for (uint64_t row = 0; row < n; ++row) {
        const uint64_t b = R.row_ptr[row], e = R.row_ptr[row + 1];
        if (e - b < 2) continue;
        const double ai = a[row];
        uint64_t past_prefix = b;  // first entry of the row outside the summed prefix
        while (past_prefix < e && R.entries[past_prefix].index < active.summed_prefix) ++past_prefix;
        for (uint64_t p = b; p + 1 < e; ++p) {
          const uint32_t hp = R.entries[p].index;
          if (hp % workers != r) continue;
          const double xv = ai * static_cast<double>(R.entries[p].value);
          for (uint64_t q = std::max(p + 1, past_prefix); q < e; ++q) {
            const uint32_t hq = R.entries[q].index;
            if (!(bound[hp] * bound[hq] >= active.t)) break;
            table.add((uint64_t{hp} << 32) | hq, xv * static_cast<double>(R.entries[q].value));
            ++updates[r];
          }
        }
      }
      {
        std::lock_guard<std::mutex> lock(found_mutex);
        found_memory.resize(found_memory.bytes() + table.size() * 3 * sizeof(uint64_t));
      }
      found[r].reserve(table.size());
      table.for_each([&](uint64_t key, double sum) {
        uint64_t j = active.ids[key >> 32], k = active.ids[key & 0xffffffffULL];
        if (j > k) std::swap(j, k);
        found[r].emplace_back(poly2_id(kPoly2Cross, j, k), sum);
      });
    });
  });
  if (pair_updates)
    for (uint64_t u : updates) *pair_updates += u;
  std::vector<std::pair<uint64_t, double>> pairs;
  for (auto& part : found) {
    pairs.insert(pairs.end(), part.begin(), part.end());
    std::vector<std::pair<uint64_t, double>>().swap(part);
  }
  std::sort(pairs.begin(), pairs.end());
  out.keys.reserve(pairs.size());
  out.values.reserve(pairs.size());
  for (const auto& [key, sum] : pairs) {
    out.keys.push_back(key);
    out.values.push_back(sum);
  }
  return out;
}

std::vector<GeneratedColumn> poly2_columns(const ShardStore& store, uint64_t candidate, double gamma, double coef0) {
  const uint64_t kind = poly2_kind(candidate), j = poly2_first(candidate), k = poly2_second(candidate);
  std::vector<GeneratedColumn> out(1);
  FeatureKey& key = out[0].key;
  std::vector<uint32_t>& rows = out[0].rows;
  std::vector<float>& values = out[0].values;
  key.kind = kind == kPoly2Linear ? FeatureKind::kLinear : kind == kPoly2Square ? FeatureKind::kSquare
                                                                                 : FeatureKind::kCross;
  key.ids[0] = j;
  if (kind == kPoly2Cross) key.ids[1] = k;
  std::vector<uint32_t> rows_a, rows_b;
  std::vector<float> vals_a, vals_b;
  store.read_column(j, rows_a, vals_a);
  if (kind == kPoly2Linear) {
    const float s = static_cast<float>(std::sqrt(2.0 * gamma * coef0));
    for (size_t e = 0; e < rows_a.size(); ++e) {
      rows.push_back(rows_a[e]);
      values.push_back(s * vals_a[e]);
    }
  } else if (kind == kPoly2Square) {
    for (size_t e = 0; e < rows_a.size(); ++e) {
      rows.push_back(rows_a[e]);
      values.push_back(static_cast<float>(gamma * vals_a[e] * vals_a[e]));
    }
  } else {
    store.read_column(k, rows_b, vals_b);
    const double s = std::sqrt(2.0) * gamma;
    size_t p = 0, q = 0;
    while (p < rows_a.size() && q < rows_b.size()) {
      if (rows_a[p] < rows_b[q]) ++p;
      else if (rows_b[q] < rows_a[p]) ++q;
      else {
        rows.push_back(rows_a[p]);
        values.push_back(static_cast<float>(s * vals_a[p] * vals_b[q]));
        ++p;
        ++q;
      }
    }
  }
  return out;
}

uint64_t poly2_candidate_of(const FeatureKey& key) {
  if (key.kind == FeatureKind::kCross) return poly2_id(kPoly2Cross, key.ids[0], key.ids[1]);
  return poly2_id(key.kind == FeatureKind::kSquare ? kPoly2Square : kPoly2Linear, key.ids[0]);
}

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

size_t ColumnRanges::find(uint64_t id) const {
  const auto at = std::lower_bound(ids.begin(), ids.end(), id);
  return at != ids.end() && *at == id ? static_cast<size_t>(at - ids.begin()) : ids.size();
}

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

namespace {

// One block's component sums of its unselected non-empty columns.
struct ExpansionColumns {
  std::vector<uint64_t> ids, count;
  std::vector<double> sum_a, c;  // c: dim() per column
};

}  // namespace

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
  add_pass(pass, p);
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

}  // namespace fgm
