// The degree-2 polynomial feature space of FGM Section 6.2,
//   φ(x) = [√(2γr)·x_j, γ·x_j², √2·γ·x_j·x_k (j < k)]   ((γ x'z + r)² minus its constant r²,
//                                                        which the bias absorbs),
// searched by the incremental worst-case analysis of Algorithm 5 without ever
// materialising the (m+1)(m+2)/2-dimensional expansion. Scores are the squares
// of the c-values: linear 2γr·c_j², square γ²·q_j², cross 2γ²·p_jk², with
// c_j = Σ a_i x_ij, q_j = Σ a_i x_ij², p_jk = Σ a_i x_ij x_ik (a = α∘y).
//
// The pair stage is exact and bounded:
//  1. One streamed pass over the column blocks gives c_j, q_j and the bound
//     u_j² = Σ |a_i| x_ij²; by Cauchy–Schwarz |p_jk| ≤ u_j·u_k.
//  2. The top-B threshold θ is seeded with the linear and square scores and
//     the exact scores of all pairs among the `seed_features_` largest u_j.
//  3. Only pairs with 2γ²u_j²u_k² ≥ θ can enter the top B. The features that
//     can take part in one (the active set H) are transposed into a row-major
//     block (two streamed passes over their columns), rows sorted by
//     decreasing u so a row's eligible partners of j form a prefix.
//  4. Pairs of H are accumulated exactly, Σ_i in row order: dense active
//     blocks (and a dense seed) by the dispatched GEMM of
//     poly2_dense_pairs.h (X_Hᵀ diag(a) X_H, upper triangle), sparse
//     ones over j-partitions sized from the memory budget (Algorithm 5's
//     block pairs): pairs of the heaviest features in a dense triangle, the
//     rest in open-addressing tables; a dense block's pairs that can
//     reach the B-th best are summed again in row order, so every offered
//     pair score is the same row-order sum on every path. Every pair that
//     could reach θ (within a certified rounding slack) is scored exactly,
//     so the top B equals that of the full expansion, ties included.
// Results do not depend on the thread count: every sum has a fixed order and
// the top-B merge is order-free (ties go to the smaller id).
// Memory: every array of the pair stage (per-feature bounds and order, seed
// entries, active set, per-block column copies in flight, row-major block,
// partition plan, pair tables and triangles, dense block) is reserved from the
// budget before it is allocated; what is left is O(blocks + threads)
// bookkeeping. The large ones live in 2 MiB pages (core/huge_pages.h): they
// are allocated afresh by every pass.
#include "core/clock.h"
#include "features/poly2_space.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "core/huge_pages.h"
#include "core/loop_rendezvous.h"
#include "core/messages.h"
#include "core/simd/simd.h"
#include "features/pair_sum_table.h"
#include "features/poly2_dense_pairs.h"

namespace fgm {
namespace {

constexpr uint32_t kNotActive = UINT32_MAX;
// A block whose measured density is at least this goes through the dense
// path (poly2_dense_pairs.h): GEMM beats hashed accumulation by far more than
// the wasted zero products once a fifth of the block is nonzero.
constexpr double kDenseDensity = 0.2;
// The sparse pair stage sums pairs of the heaviest this many active features
// in a dense triangle (per partition ≤ 1024² doubles and flags, 9 MiB).
constexpr uint32_t kCorePairFeatures = 1024;

struct Stage1Output {
  Stage1Output(size_t B, uint64_t count, MemoryBudget& budget)
      : memory(budget.reserve(count * (sizeof(double) + 2 * sizeof(uint64_t)), "poly2 per-block bounds")),
        top(B, &budget),
        ids(count),
        weights(count),
        nnz(count) {}
  Reservation memory;
  TopBCache top;
  std::vector<uint64_t> ids;    // the block's non-empty columns
  std::vector<double> weights;  // u_j² = Σ |a_i| x_ij²
  std::vector<uint64_t> nnz;
};

// A block's active entries, copied cell by cell (tile order) while the block
// is held: no whole-block column conversion, since the rows are sorted by
// active index afterwards anyway. The count pass copies row ids only.
struct ActiveEntries {
  Reservation memory;
  std::vector<uint32_t> rows;
  std::vector<uint32_t> index;  // active index of each entry (scatter pass only)
  std::vector<float> values;    // (scatter pass only)
};

// Row-major view of the active features: per row, (active index, value) pairs
// sorted by active index, i.e. by decreasing bound u.
struct ActiveRows {
  HugeVector<uint64_t> row_ptr;
  HugeVector<uint32_t> index;
  HugeVector<float> value;
};

void sort_active_rows(ActiveRows& R, uint64_t n, int threads, MemoryBudget& budget);

// The bound threshold t for θ, lowered by a certified rounding slack so that
// û_j·û_k ≥ t (as the pruning tests evaluate it) holds for every pair whose
// computed score ŝ_jk can reach θ. With ε = 2^-53, γ_k = kε/(1−kε) and N ≤ n
// the terms of a column sum (Higham, Accuracy and Stability, §3.1, §4.2):
//  * every term a_i·x_ij·x_ik (and |a_i|·x_ij²) is rounded twice, and a sum of
//    N terms in any order (row order, GEMM blocks, group partials) is off by
//    ≤ γ_{N−1}Σ|terms|, so |p̂_jk| ≤ (1+γ_{n+1})·Σ_i |a_i x_ij x_ik|
//    ≤ (1+γ_{n+1})·u_j·u_k (Cauchy–Schwarz in the |a|-weighted norm);
//  * û_j = fl(√fl(Σ|a_i|x_ij²)) ≥ (1−ε)(1−γ_{n+1})^{1/2}·u_j;
//  * ŝ_jk = fl(fl(cs·p̂)·p̂) ≤ (1+ε)²·cs·p̂², and t̂ = fl(√fl(θ/cs)) ≤ (1+ε)^{3/2}√(θ/cs).
// So ŝ_jk ≥ θ implies û_j·û_k ≥ t̂·(1−2γ_{n+1}−5ε) to first order; the
// comparisons fl(û_j·û_k) < t and û_k ≥ fl(t/û_j) each cost one ε more.
// ρ = 4(n+8)ε covers all of it with room (ρ ≥ 2γ_{n+1} + 10ε for n < 2^48).
double pair_bound_threshold(double theta, double cross_scale, uint64_t n) {
  const double rho = 4.0 * (static_cast<double>(n) + 8.0) * std::ldexp(1.0, -53);
  return std::sqrt(theta / cross_scale) * std::max(0.0, 1.0 - rho);
}

// Algorithm 5's threshold test on a row: the length of the prefix of
// idx[0, len) with u[idx] ≥ need. Sparse rows mostly stop within a few
// entries, so the first 8 are tested inline and only longer scans go to the
// SIMD kernel (same result either way).
inline uint64_t eligible_prefix(const double* u, const uint32_t* idx, uint64_t len, double need,
                                decltype(simd::Kernels::prefix_scaled_at_least) kernel) {
  uint64_t q = 0;
  for (; q < len && q < 8; ++q)
    if (!(u[idx[q]] >= need)) return q;
  return q == len ? q : q + kernel(u, idx + q, len - q, 1.0, need);
}

}  // namespace

Poly2Space::Poly2Space(const SpaceRows& rows, const FeatureSpaceSettings& settings, MemoryBudget& budget)
    : partitions_(rows.partitions),
      budget_(budget),
      n_features_(rows.n_features()),
      n_rows_(rows.n_rows()),
      gamma_(settings.gamma),
      coef0_(settings.coef0),
      selected_(&budget) {
  if (n_features_ >= (uint64_t{1} << 31))
    throw Error(ErrorKind::kConfig,
                msg::out_of_range("", "features.kind", "poly2",
                                  fmt::format("at most 2^31-1 base features (the store's id space has {}; poly2 keeps "
                                              "per-feature bounds over the whole id space)",
                                              n_features_)));
  if (settings.pair_block_features > 0) seed_features_ = settings.pair_block_features;
}

double Poly2Space::dimension() const {
  double m = static_cast<double>(n_features_);
  return 2 * m + m * (m - 1) / 2;  // linear + square + cross (the constant is the bias)
}

struct Poly2Space::Pass {
  const ScoringContext& ctx;
  const uint64_t m, n;
  const double lin_scale, sq_scale, cross_scale;  // (√(2γr))², γ², (√2 γ)²
  SpaceScores out;
  TopBCache top;
  Reservation bounds_mem;
  HugeVector<double> u;              // u_j, the pair bounds
  HugeVector<uint32_t> column_nnz;
  std::vector<uint32_t> order;       // features with u_j > 0 by decreasing u (ties: smaller id)
  size_t seeded = 0;                 // order[0, seeded) formed the seed
  double t = 0;                      // pair (j,k) is eligible iff u_j·u_k ≥ t
  Reservation active_mem;
  std::vector<uint32_t> active;      // base ids of the active set H, by decreasing u
  std::vector<double> uh;            // u of the active features
  Reservation rows_mem;
  ActiveRows R;                      // the active block, row-major (sparse path)
  DenseFeatureBlock dense;           // columns order[0, dense.cols) (dense path)

  Pass(const ScoringContext& context, uint64_t features, uint64_t rows, double gamma, double coef0)
      : ctx(context),
        m(features),
        n(rows),
        lin_scale(2.0 * gamma * coef0),
        sq_scale(gamma * gamma),
        cross_scale(2.0 * gamma * gamma),
        top(context.B, context.budget) {}
};

void Poly2Space::offer_pair(const Pass& pass, TopBCache& cache, uint64_t j, uint64_t k, double p) const {
  if (j > k) std::swap(j, k);
  double s = pass.cross_scale * p * p;
  if (!(s > 0) || !cache.may_admit(s)) return;
  uint64_t id = poly2_id(kPoly2Cross, j, k);
  if (selected_.test(id)) return;
  cache.offer({s, id});
}

SpaceScores Poly2Space::score(const ScoringContext& ctx) {
  if (partitions_) return score_partitions(ctx);
  stats_ = Poly2Stats{};
  Pass pass(ctx, n_features_, n_rows_, gamma_, coef0_);
  score_single_features(pass);
  auto t_pairs = std::chrono::steady_clock::now();
  seed_pairs(pass);
  select_active_features(pass);
  if (pass.active.size() >= 2) {
    uint64_t nnz = 0;
    for (uint32_t j : pass.active) nnz += pass.column_nnz[j];
    if (dense_block_chosen(pass, nnz, pass.active.size())) {
      accumulate_dense_pairs(pass);
    } else {
      release_dense_stage(pass);
      transpose_active_features(pass);
      accumulate_sparse_pairs(pass);
    }
  }
  stats_.pair_seconds = seconds_since(t_pairs);
  pass.out.top = pass.top.take_sorted(&pass.out.top_memory);
  return std::move(pass.out);
}

// Stage 1: linear and square scores, and the pair bounds u_j, in one pass.
void Poly2Space::score_single_features(Pass& pass) {
  const ScoringContext& ctx = pass.ctx;
  MemoryBudget& budget = *ctx.budget;
  const double* a = ctx.a;
  const uint64_t B = ctx.B, m = pass.m;
  // u, column_nnz and the bound order of the features.
  pass.bounds_mem = budget.reserve(m * (sizeof(double) + 2 * sizeof(uint32_t)), "poly2 pair bounds",
                                   "use fewer base features");
  pass.u.assign(m, 0.0);
  pass.column_nnz.assign(m, 0);
  const simd::Kernels& simd_kernels = simd::kernels();
  PassStats p1 = stream_blocks<Stage1Output>(
      *ctx.stream, *ctx.blocks, "poly2 single features",
      [&](const BlockRef&, const ColumnBlock& block) {
        CscScratch scratch;  // reserved by the stream (CscBytes)
        const CscColumns cols = csc_columns(block, scratch);
        Stage1Output o(B, cols.column_count, budget);
        // Whole columns in row order (not cell by cell): the 8-lane sums then
        // do not depend on how the store is cut into row tiles.
        for (uint64_t k = 0; k < cols.column_count; ++k) {
          const uint64_t begin = cols.col_ptr[k], end = cols.col_ptr[k + 1];
          double moments[3];  // c_j, q_j, u_j² (fixed lane order: the same on every SIMD target)
          if (end - begin < 8) simd::gather_moments_short(a, cols.row_ids + begin, cols.values + begin, end - begin, moments);
          else simd_kernels.gather_moments(a, cols.row_ids + begin, cols.values + begin, end - begin, moments);
          const double c = moments[0], q = moments[1];
          const uint64_t j = cols.column_ids[k];
          o.ids[k] = j;
          o.weights[k] = moments[2];
          o.nnz[k] = end - begin;
          double sl = pass.lin_scale * c * c, sq = pass.sq_scale * q * q;
          uint64_t lid = poly2_id(kPoly2Linear, j), qid = poly2_id(kPoly2Square, j);
          if (sl > 0 && o.top.may_admit(sl) && !selected_.test(lid)) o.top.offer({sl, lid});
          if (sq > 0 && o.top.may_admit(sq) && !selected_.test(qid)) o.top.offer({sq, qid});
        }
        return o;
      },
      [&](Stage1Output&& s) {
        pass.top.merge(s.top);
        for (size_t k = 0; k < s.weights.size(); ++k) {
          pass.u[s.ids[k]] = std::sqrt(s.weights[k]);
          pass.column_nnz[s.ids[k]] = static_cast<uint32_t>(s.nnz[k]);
        }
      },
      CscBytes(ctx.store->info()));
  pass.out.pass += p1;
  pass.out.candidates_scored += 2 * m;

  order_by_bound(pass);
}

// pass.order: the features by decreasing u (ties: smaller id), but only the
// prefix any later stage reads — the features that can still have a partner
// under the threshold of the linear and square scores (θ only grows, so the
// seed's reach and the active set stay inside it), and at least the seed's
// candidates. Sorting all m bounds (15·10^6 at the scale) cost more
// than the rest of stage 1.
void Poly2Space::order_by_bound(Pass& pass) const {
  const HugeVector<double>& u = pass.u;
  const uint64_t m = pass.m;
  std::vector<uint32_t>& order = pass.order;
  const double theta = pass.top.full() ? pass.top.worst().score : 0.0;
  const double t = pruning_ ? pair_bound_threshold(theta, pass.cross_scale, pass.n) : 0.0;
  double u_max = 0;
  uint64_t positive = 0;
  for (uint64_t j = 0; j < m; ++j) {
    u_max = std::max(u_max, u[j]);
    positive += u[j] > 0;
  }
  // The same test as the prefix kernel's (u_j·u_max ≥ t).
  auto reachable = [&](uint64_t j) { return u[j] > 0 && u[j] * u_max >= t; };
  uint64_t reach = 0;
  for (uint64_t j = 0; j < m; ++j) reach += reachable(j);
  const uint64_t seed = std::min<uint64_t>(seed_features_, positive);
  auto before = [&](uint32_t x, uint32_t y) { return u[x] != u[y] ? u[x] > u[y] : x < y; };
  order.reserve(reach >= seed ? reach : positive);
  if (reach >= seed) {
    for (uint64_t j = 0; j < m; ++j)
      if (reachable(j)) order.push_back(static_cast<uint32_t>(j));
  } else {
    for (uint64_t j = 0; j < m; ++j)
      if (u[j] > 0) order.push_back(static_cast<uint32_t>(j));
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(seed), order.end(), before);
    order.resize(seed);
  }
  std::sort(order.begin(), order.end(), before);
}

// Stage 2: exact pairs among the heaviest features seed θ. The seed is capped
// by its nonzeros so popular columns cannot blow the budget.
void Poly2Space::seed_pairs(Pass& pass) {
  MemoryBudget& budget = *pass.ctx.budget;
  const double* a = pass.ctx.a;
  const std::vector<uint32_t>& order = pass.order;
  const HugeVector<uint32_t>& column_nnz = pass.column_nnz;
  // Memory: the seed's entries; work: at most (Σ nnz)·K pair products.
  const uint64_t cap = std::min<uint64_t>(budget.available() / 4 / 12, uint64_t{32} << 20);
  constexpr uint64_t kSeedWork = uint64_t{1} << 27;
  size_t K = 0;
  uint64_t seed_nnz = 0;
  while (K < std::min<size_t>(seed_features_, order.size()) && seed_nnz + column_nnz[order[K]] <= cap &&
         (seed_nnz + column_nnz[order[K]]) * (K + 1) <= kSeedWork)
    seed_nnz += column_nnz[order[K++]];
  pass.seeded = K;
  if (dense_block_chosen(pass, seed_nnz, K)) {
    read_dense_reach(pass, K);
    offer_dense_pairs(pass, static_cast<uint32_t>(K), 0);
    return;
  }
  using SeedEntry = std::tuple<uint32_t, uint32_t, float>;  // (row, seed index, value)
  uint32_t widest = 0;
  for (size_t s = 0; s < K; ++s) widest = std::max(widest, column_nnz[order[s]]);
  // Entries (exactly sized), the pair sums and one column read buffer.
  Reservation seed_mem = budget.reserve(seed_nnz * sizeof(SeedEntry) + K * K * sizeof(double) +
                                            uint64_t{widest} * (sizeof(uint32_t) + sizeof(float)),
                                        "poly2 seed pairs");
  std::vector<SeedEntry> entries;
  entries.reserve(seed_nnz);
  std::vector<uint32_t> rows;
  std::vector<float> vals;
  rows.reserve(widest);
  vals.reserve(widest);
  for (size_t s = 0; s < K; ++s) {
    pass.ctx.store->read_column(order[s], rows, vals);
    for (size_t e = 0; e < rows.size(); ++e) entries.emplace_back(rows[e], static_cast<uint32_t>(s), vals[e]);
  }
  std::sort(entries.begin(), entries.end());
  std::vector<double> acc(K * K, 0.0);
  for (size_t b = 0; b < entries.size();) {
    size_t e = b;
    uint32_t row = std::get<0>(entries[b]);
    while (e < entries.size() && std::get<0>(entries[e]) == row) ++e;
    for (size_t p = b; p < e; ++p)
      for (size_t q = p + 1; q < e; ++q)
        acc[std::get<1>(entries[p]) * K + std::get<1>(entries[q])] +=
            a[row] * static_cast<double>(std::get<2>(entries[p])) * static_cast<double>(std::get<2>(entries[q]));
    pass.out.pair_updates += (e - b) * (e - b - 1) / 2;
    b = e;
  }
  for (size_t p = 0; p < K; ++p)
    for (size_t q = p + 1; q < K; ++q) offer_pair(pass, pass.top, order[p], order[q], acc[p * K + q]);
  pass.out.candidates_scored += K * (K - 1) / 2;
}

// Stage 3a: θ, the bound threshold t and the active set H (features that can
// still have a partner reaching θ).
void Poly2Space::select_active_features(Pass& pass) {
  const double theta = pass.top.full() ? pass.top.worst().score : 0.0;
  // A pair whose computed score ties θ must stay eligible (it wins the tie on
  // a smaller id): t carries the certified rounding slack.
  pass.t = pruning_ ? pair_bound_threshold(theta, pass.cross_scale, pass.n) : 0.0;
  stats_.threshold = theta;
  const HugeVector<double>& u = pass.u;
  const std::vector<uint32_t>& order = pass.order;
  const double u_max = order.empty() ? 0.0 : u[order[0]];
  // The prefix of `order` with a possible partner: u_j·u_max ≥ t.
  const uint64_t active_count = simd::kernels().prefix_scaled_at_least(u.data(), order.data(), order.size(), u_max, pass.t);
  pass.active_mem = pass.ctx.budget->reserve(active_count * (sizeof(uint32_t) + sizeof(double)),
                                             "poly2 active set");
  std::vector<uint32_t>& active = pass.active;
  active.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(active_count));
  // Only features with a possible partner besides themselves.
  while (active.size() >= 2 && u[active.back()] * u[active[0]] < pass.t) active.pop_back();
  if (active.size() < 2) active.clear();
  stats_.active_features = active.size();
  pass.uh.resize(active.size());
  for (size_t h = 0; h < active.size(); ++h) pass.uh[h] = u[active[h]];
}

// Before the sparse stages: the dense block the seed read (its reach may
// exceed the seed) and the bound order are not used by them, and the column
// counts' array becomes the active-feature index. Held, they would sit beside
// the transposed rows for the whole pair stage (see the OOM of issue 9's
// scale run: a 172 MiB dense seed block beside 107 MiB of active rows).
void Poly2Space::release_dense_stage(Pass& pass) {
  HugeVector<float>().swap(pass.dense.values);
  pass.dense.memory.release();
  pass.dense.cols = 0;
  std::vector<uint32_t>().swap(pass.order);
  pass.bounds_mem.resize(pass.m * (sizeof(double) + sizeof(uint32_t)));  // u and column_nnz
}

// Stage 3b: the active columns transposed into a row-major block (two
// streamed passes over their blocks), each row sorted by active index.
void Poly2Space::transpose_active_features(Pass& pass) {
  const ScoringContext& ctx = pass.ctx;
  MemoryBudget& budget = *ctx.budget;
  const uint64_t n = pass.n;
  const std::vector<uint32_t>& active = pass.active;
  const uint32_t H = static_cast<uint32_t>(active.size());
  // The index takes over column_nnz's array (and its share of bounds_mem).
  HugeVector<uint32_t> active_index = std::move(pass.column_nnz);
  std::fill(active_index.begin(), active_index.end(), kNotActive);
  for (uint32_t h = 0; h < H; ++h) active_index[active[h]] = h;
  // The blocks whose id range holds an active feature.
  std::vector<uint32_t> active_ids(active);
  std::sort(active_ids.begin(), active_ids.end());
  std::vector<BlockRef> blocks;
  for (const auto& b : *ctx.blocks) {
    auto it = std::lower_bound(active_ids.begin(), active_ids.end(), b.first_column);
    if (it != active_ids.end() && *it < b.end_column) blocks.push_back(b);
  }
  // f(h, row, value) for every active entry of a block, cell by cell (the
  // active index of each listed column is looked up once per column; that
  // array is the transform's scratch, reserved by the stream).
  auto for_active_entries = [&](const ColumnBlock& block, auto&& f) {
    std::vector<uint32_t> h_of(block.column_count);
    for (uint64_t k = 0; k < block.column_count; ++k) h_of[k] = active_index[block.column_ids[k]];
    const uint32_t cells = block.cell_count();
    for (uint32_t c = 0; c < cells; ++c) {
      const uint32_t h = h_of[block.cell_column[c]];
      if (h == kNotActive) continue;
      for (uint32_t e = block.cell_ptr[c]; e < block.cell_ptr[c + 1]; ++e) f(h, block.row_ids[e], block.values[e]);
    }
  };
  auto column_scratch = [](const BlockRef& ref) { return ref.column_count * sizeof(uint32_t); };
  // A block's active entries, copied (the count pass copies row ids only);
  // the copy is reserved: at most the block's own entries, per block in flight.
  auto extract = [&](const ColumnBlock& block, bool with_values) {
    ActiveEntries o;
    uint64_t copied = 0;
    for_active_entries(block, [&](uint32_t, uint32_t, float) { ++copied; });
    o.memory = budget.reserve(copied * (with_values ? 3 * sizeof(uint32_t) : sizeof(uint32_t)),
                              "poly2 active columns in flight");
    o.rows.reserve(copied);
    if (with_values) {
      o.index.reserve(copied);
      o.values.reserve(copied);
    }
    for_active_entries(block, [&](uint32_t h, uint32_t row, float value) {
      o.rows.push_back(row);
      if (with_values) {
        o.index.push_back(h);
        o.values.push_back(value);
      }
    });
    return o;
  };
  // Count per row, then scatter (two passes over the active columns only).
  pass.rows_mem = budget.reserve(2 * (n + 1) * sizeof(uint64_t), "poly2 active rows");
  ActiveRows& R = pass.R;
  R.row_ptr.assign(n + 1, 0);
  pass.out.pass += stream_blocks<ActiveEntries>(
      *ctx.stream, blocks, "poly2 active columns (count)",
      [&](const BlockRef&, const ColumnBlock& block) { return extract(block, false); },
      [&](ActiveEntries&& o) {
        for (uint32_t r : o.rows) ++R.row_ptr[r + 1];
      },
      column_scratch);
  for (uint64_t i = 0; i < n; ++i) R.row_ptr[i + 1] += R.row_ptr[i];
  const uint64_t nnz_h = R.row_ptr[n];
  pass.rows_mem.resize(2 * (n + 1) * sizeof(uint64_t) + nnz_h * (sizeof(uint32_t) + sizeof(float)));
  R.index.resize(nnz_h);
  R.value.resize(nnz_h);
  HugeVector<uint64_t> cursor(R.row_ptr.begin(), R.row_ptr.end() - 1);
  pass.out.pass += stream_blocks<ActiveEntries>(
      *ctx.stream, blocks, "poly2 active columns (transpose)",
      [&](const BlockRef&, const ColumnBlock& block) { return extract(block, true); },
      [&](ActiveEntries&& o) {
        for (size_t e = 0; e < o.rows.size(); ++e) {
          const uint64_t pos = cursor[o.rows[e]]++;
          R.index[pos] = o.index[e];
          R.value[pos] = o.values[e];
        }
      },
      column_scratch);
  cursor = {};
  sort_active_rows(R, n, std::max(1, ctx.threads), budget);
}

namespace {

// Sorts each row of R by active index (= decreasing bound), rows in
// parallel: short rows by insertion in place, long ones through a buffer
// (one per thread, reserved).
void sort_active_rows(ActiveRows& R, uint64_t n, int threads, MemoryBudget& budget) {
  constexpr uint64_t kInsertionRow = 32;
  uint64_t widest_row = 0;
  for (uint64_t i = 0; i < n; ++i) widest_row = std::max(widest_row, R.row_ptr[i + 1] - R.row_ptr[i]);
  Reservation tmp_mem = budget.reserve(uint64_t(threads) * widest_row * sizeof(std::pair<uint32_t, float>), "poly2 row sort");
  tbb::task_arena arena(threads);
  LoopRendezvous rendezvous(threads > 1);  // test binaries: two threads at once (core/loop_rendezvous.h)
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, n, 4096), [&](const tbb::blocked_range<uint64_t>& range) {
      rendezvous.arrive();
      std::vector<std::pair<uint32_t, float>> tmp;
      for (uint64_t i = range.begin(); i < range.end(); ++i) {
        const uint64_t b = R.row_ptr[i], e = R.row_ptr[i + 1];
        if (e - b <= kInsertionRow) {
          for (uint64_t p = b + 1; p < e; ++p) {
            const uint32_t h = R.index[p];
            const float v = R.value[p];
            uint64_t q = p;
            for (; q > b && R.index[q - 1] > h; --q) {
              R.index[q] = R.index[q - 1];
              R.value[q] = R.value[q - 1];
            }
            R.index[q] = h;
            R.value[q] = v;
          }
          continue;
        }
        tmp.clear();
        for (uint64_t p = b; p < e; ++p) tmp.emplace_back(R.index[p], R.value[p]);
        std::sort(tmp.begin(), tmp.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        for (uint64_t p = b; p < e; ++p) {
          R.index[p] = tmp[p - b].first;
          R.value[p] = tmp[p - b].second;
        }
      }
    });
  });
}

}  // namespace

// Dense blocks (seed or active set) by measured density, if the block, its
// products and the packed panels fit in half of what the budget has left.
bool Poly2Space::dense_block_chosen(const Pass& pass, uint64_t nnz, uint64_t columns) const {
  const double density = static_cast<double>(nnz) / (static_cast<double>(pass.n) * static_cast<double>(columns));
  return dense_allowed_ && columns >= 2 && density >= kDenseDensity &&
         dense_pair_bytes(pass.n, columns) < pass.ctx.budget->available() / 2;
}

// Pairs of the columns order[0, count) — a prefix of the bound order, so
// column h of the block is active index h — by the dense path, offered to
// pass.top; pairs with both indices < skip were offered before.
void Poly2Space::offer_dense_pairs(Pass& pass, uint32_t count, uint32_t skip) {
  if (count <= skip) return;  // every pair was offered with the seed
  DenseFeatureBlock& X = pass.dense;
  X.rows = pass.n;
  if (X.cols < count) {
    PassStats streamed;
    append_dense_columns(pass.ctx, pass.order.data() + X.cols, count - X.cols, X, &streamed);
    pass.out.pass += streamed;
  }
  const uint32_t* ids = pass.order.data();
  auto pair_id = [&](uint32_t p, uint32_t q) {
    return poly2_id(kPoly2Cross, std::min(ids[p], ids[q]), std::max(ids[p], ids[q]));
  };
  DensePairCallbacks cb;
  cb.pair_id = pair_id;
  cb.excluded = [&](uint32_t p, uint32_t q) { return selected_.test(pair_id(p, q)); };
  cb.offer = [&](uint32_t p, uint32_t q, double sum) { offer_pair(pass, pass.top, ids[p], ids[q], sum); };
  std::vector<double> uh(count);
  for (uint32_t h = 0; h < count; ++h) uh[h] = pass.u[ids[h]];
  const DensePairStats d = offer_dense_block_pairs(X, count, pass.ctx.a, uh, skip, pass.cross_scale, pass.top,
                                                   pass.ctx.threads, *pass.ctx.budget, cb);
  stats_.dense_path = true;
  stats_.dense_seconds += d.gemm_seconds;
  stats_.dense_flops += d.gemm_flops;
  const uint64_t done = std::min(skip, count);  // pairs inside the seed were counted in stage 2
  const uint64_t pairs = uint64_t{count} * (count - 1) / 2 - (done > 0 ? done * (done - 1) / 2 : 0);
  pass.out.pair_updates += pass.n * pairs;
  pass.out.candidates_scored += pairs;
  stats_.candidate_pairs += pairs;
}

// With a dense seed, the dense block is read for every column the active set
// can still contain — u_j·u_max ≥ t for the θ of the linear and square scores
// (θ only grows) — as far as the budget allows, so that the seed and the
// active set share one streamed pass; if those columns together are too
// sparse for the dense path, only the seed's.
void Poly2Space::read_dense_reach(Pass& pass, size_t seeded) {
  const double theta = pass.top.full() ? pass.top.worst().score : 0.0;
  const double t = pruning_ ? pair_bound_threshold(theta, pass.cross_scale, pass.n) : 0.0;
  const std::vector<uint32_t>& order = pass.order;
  const double u_max = order.empty() ? 0.0 : pass.u[order[0]];
  uint64_t reach = simd::kernels().prefix_scaled_at_least(pass.u.data(), order.data(), order.size(), u_max, t);
  // Only a reach that would itself go dense is worth reading now; otherwise
  // the active set (inside it) goes sparse, and the columns past the seed
  // would be read, zero-filled and dropped for nothing (the scale run's seed
  // of 21 columns read 45: 172 MiB).
  uint64_t reach_nnz = 0;
  for (uint64_t h = 0; h < reach; ++h) reach_nnz += pass.column_nnz[order[h]];
  if (!dense_block_chosen(pass, reach_nnz, reach)) reach = seeded;
  while (reach > seeded && dense_pair_bytes(pass.n, reach) >= pass.ctx.budget->available() / 2) reach = reach * 3 / 4;
  reach = std::max<uint64_t>(reach, seeded);
  pass.dense.rows = pass.n;
  PassStats streamed;
  append_dense_columns(pass.ctx, order.data(), static_cast<uint32_t>(reach), pass.dense, &streamed);
  pass.out.pass += streamed;
}

// Stage 4, dense active block (the active set is a prefix of the bound order
// that contains the seed).
void Poly2Space::accumulate_dense_pairs(Pass& pass) {
  offer_dense_pairs(pass, static_cast<uint32_t>(pass.active.size()), static_cast<uint32_t>(pass.seeded));
}

// Stage 4, sparse active block: count eligible pair updates per first index,
// cut j-partitions that fit the budget, accumulate each exactly in row order.
void Poly2Space::accumulate_sparse_pairs(Pass& pass) {
  MemoryBudget& budget = *pass.ctx.budget;
  const ActiveRows& R = pass.R;
  const double* a = pass.ctx.a;
  const uint64_t n = pass.n;
  const double t = pass.t;
  const std::vector<double>& uh = pass.uh;
  const std::vector<uint32_t>& active = pass.active;
  const uint32_t H = static_cast<uint32_t>(active.size());
  const size_t K = pass.seeded;
  // Update counts and partition cuts (≤ H + 1), the per-partition counts.
  Reservation plan_mem = budget.reserve(uint64_t{H} * (sizeof(uint64_t) + sizeof(uint32_t) + sizeof(uint64_t)) +
                                            sizeof(uint32_t),
                                        "poly2 pair partition plan");
  const int threads = std::max(1, pass.ctx.threads);
  // Row i's eligible partners of entry p are the prefix of the entries after
  // it with û ≥ t/û_p (rows are sorted by decreasing û). Counted over row
  // ranges in parallel, one count array per range (integer sums: the same
  // for any thread count).
  const auto eligible = simd::kernels().prefix_scaled_at_least;
  // Pairs of two seed features (active indices < K) were scored in stage 2:
  // a row's partners of a seed entry start at its first entry ≥ K.
  auto first_at_least = [&](uint64_t b, uint64_t e, uint64_t index) {
    while (b < e && R.index[b] < index) ++b;
    return b;
  };
  Reservation count_mem = budget.reserve(uint64_t(threads - 1) * H * sizeof(uint64_t), "poly2 pair update counts");
  std::vector<std::vector<uint64_t>> range_updates(static_cast<size_t>(threads));
  tbb::task_arena count_arena(threads);
  LoopRendezvous count_rendezvous(threads > 1);
  count_arena.execute([&] {
    tbb::parallel_for(0, threads, [&](int r) {
      count_rendezvous.arrive();
      std::vector<uint64_t>& counts = range_updates[static_cast<size_t>(r)];
      counts.assign(H, 0);
      const uint64_t first = n * static_cast<uint64_t>(r) / threads, last = n * static_cast<uint64_t>(r + 1) / threads;
      for (uint64_t i = first; i < last; ++i) {
        const uint64_t b = R.row_ptr[i], e = R.row_ptr[i + 1];
        const uint64_t seed_end = first_at_least(b, e, K);
        for (uint64_t p = b; p < e; ++p) {
          const uint64_t end = p + 1 + eligible_prefix(uh.data(), R.index.data() + p + 1, e - p - 1, t / uh[R.index[p]], eligible);
          const uint64_t start = std::max(p + 1, seed_end);
          if (end > start) counts[R.index[p]] += end - start;
        }
      }
    });
  });
  std::vector<uint64_t> updates = std::move(range_updates[0]);
  for (size_t r = 1; r < range_updates.size(); ++r) {
    for (uint32_t h = 0; h < H; ++h) updates[h] += range_updates[r][h];
    std::vector<uint64_t>().swap(range_updates[r]);
  }
  count_mem.release();
  const uint64_t total_updates = std::accumulate(updates.begin(), updates.end(), uint64_t{0});
  // Worst case (no repeated pair) a table holds one slot per update at load
  // ≥ 0.35, old and new arrays during growth: ~48 bytes per update.
  const uint64_t per_partition = std::max<uint64_t>(1024, budget.available() / threads / 48);
  const uint64_t target = std::max<uint64_t>(1, std::min(per_partition, total_updates / threads + 1));
  std::vector<uint32_t> cuts;
  cuts.reserve(uint64_t{H} + 1);
  cuts.push_back(0);
  uint64_t run = 0;
  for (uint32_t h = 0; h < H; ++h) {
    if (run > 0 && run + updates[h] > target) {
      cuts.push_back(h);
      run = 0;
    }
    run += updates[h];
  }
  cuts.push_back(H);
  const size_t parts = cuts.size() - 1;
  stats_.partitions = parts;
  std::vector<TopBCache> local(parts, TopBCache(pass.ctx.B, pass.ctx.budget));
  std::vector<uint64_t> distinct(parts, 0);
  // Pairs of two core features (active index < core: the heaviest, which
  // co-occur in most rows) are summed in a dense triangle indexed directly,
  // the rest in a hash table: in the scale run almost every update is a core
  // pair, and a direct add costs a fraction of a hash probe. Either way each
  // pair's terms are added in row order, so the sums are the same.
  uint32_t core = std::min<uint32_t>(H, kCorePairFeatures);
  while (core > 0 && static_cast<uint64_t>(threads) * core * core * (sizeof(double) + 1) > budget.available() / 4) core /= 2;
  auto t_sparse = std::chrono::steady_clock::now();
  // Each partition's table is reserved before it runs; at most `threads` at once.
  tbb::task_arena arena(threads);
  LoopRendezvous rendezvous(threads > 1);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, parts, [&](size_t part) {
      rendezvous.arrive();
      const uint32_t lo = cuts[part], hi = cuts[part + 1];
      uint64_t expected = 0;
      for (uint32_t h = lo; h < hi; ++h) expected += updates[h];
      // The partition's core rows [lo, core_hi) × core partners.
      const uint32_t core_hi = std::min(hi, core), core_rows = core_hi > lo ? core_hi - lo : 0;
      Reservation core_mem = budget.reserve(uint64_t{core_rows} * core * (sizeof(double) + 1), "poly2 core pair sums");
      std::vector<double> core_sum(uint64_t{core_rows} * core, 0.0);
      std::vector<uint8_t> core_seen(uint64_t{core_rows} * core, 0);
      PairSumTable table(expected, budget, "poly2 pair accumulators",
                         "lower engine.threads (fewer pair partitions in flight)");
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t b = R.row_ptr[i], e = R.row_ptr[i + 1];
        const double ai = a[i];
        const uint64_t seed_end = first_at_least(b, e, K);
        uint64_t core_end = 0;  // first entry ≥ core (found once per row, if needed)
        bool core_found = false;
        for (uint64_t p = b; p < e; ++p) {
          const uint32_t hp = R.index[p];
          if (hp < lo) continue;
          if (hp >= hi) break;  // rows are sorted by active index
          const double xv = ai * static_cast<double>(R.value[p]);
          const uint64_t end = p + 1 + eligible_prefix(uh.data(), R.index.data() + p + 1, e - p - 1, t / uh[hp], eligible);
          uint64_t q = std::max(p + 1, seed_end);
          if (hp < core) {
            if (!core_found) {
              core_end = first_at_least(q, e, core);
              core_found = true;
            }
            double* sum = core_sum.data() + uint64_t{hp - lo} * core;
            uint8_t* seen = core_seen.data() + uint64_t{hp - lo} * core;
            for (const uint64_t stop = std::min(end, core_end); q < stop; ++q) {
              sum[R.index[q]] += xv * static_cast<double>(R.value[q]);
              seen[R.index[q]] = 1;
            }
          }
          for (; q < end; ++q) table.add((uint64_t{hp} << 32) | R.index[q], xv * static_cast<double>(R.value[q]));
        }
      }
      distinct[part] = table.size();
      table.for_each([&](uint64_t key, double sum) {
        offer_pair(pass, local[part], active[key >> 32], active[key & 0xffffffffULL], sum);
      });
      for (uint32_t hp = lo; hp < core_hi; ++hp)
        for (uint32_t hq = hp + 1; hq < core; ++hq) {
          const uint64_t at = uint64_t{hp - lo} * core + hq;
          if (!core_seen[at]) continue;
          ++distinct[part];
          offer_pair(pass, local[part], active[hp], active[hq], core_sum[at]);
        }
    }, tbb::simple_partitioner());
  });
  stats_.sparse_seconds = seconds_since(t_sparse);
  stats_.sparse_updates = total_updates;
  for (const auto& l : local) pass.top.merge(l);
  for (uint64_t d : distinct) stats_.candidate_pairs += d;
  pass.out.pair_updates += total_updates;
  pass.out.candidates_scored += stats_.candidate_pairs;
}

// ---- Per partition: the sums one partition's rows give, in a fixed order
// that depends on the partition's data only (not on threads or ranks) ----

// The features that may take part in a candidate pair, by decreasing bound
// (ties: smaller id); pair (p, q), p < q, is a candidate iff
// bound[p]·bound[q] ≥ t (evaluated exactly so on every rank).
struct Poly2ActiveSet {
  std::vector<uint32_t> ids;
  std::vector<double> bound;
  double t = 0;
  // Pairs of two features among ids[0, summed_prefix) are skipped (their
  // sums are known: the seed's pairs, the heaviest work of a pass).
  uint32_t summed_prefix = 0;
};

namespace {

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
struct PartitionRows {
  std::vector<uint64_t> row_ptr;
  std::vector<ActiveEntry> entries;
};

PartitionRows partition_rows(const BlockStream& stream, const std::vector<BlockRef>& blocks, const Poly2ActiveSet& active,
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
  if (pass) *pass += p;
  PartitionRows R;
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


// Per non-empty base feature j of the partition: c_j = Σ a_i x_ij,
// q_j = Σ a_i x_ij², w_j = Σ |a_i| x_ij² (the square of the pair bound u_j)
// over the partition's rows, each column in row order by the fixed-lane
// kernel simd gather_moments (the same bits on every SIMD target), as sparse
// sums with keys 3j (c_j), 3j + 1 (q_j), 3j + 2 (w_j), increasing: 48 bytes
// per non-empty column, whatever the id space (reserved by the caller).
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
  if (pass) *pass += p;
  return out;
}

// p_jk = Σ_i a_i x_ij x_ik over the partition's rows, in row order, for the
// candidate pairs of `active` (outside the summed prefix) that co-occur in at least one row; keys
// poly2_id(kPoly2Cross, j, k) with j < k, increasing. The active columns'
// entries, their row-major copy and the pair table are reserved from `budget`.
SparseSums poly2_partition_pair_sums(const BlockStream& stream, const std::vector<BlockRef>& blocks, const double* a,
                                     const Poly2ActiveSet& active, MemoryBudget& budget, PassStats* pass,
                                     uint64_t* pair_updates) {
  SparseSums out;
  if (active.ids.size() < 2) return out;
  Reservation rows_memory;
  const PartitionRows R = partition_rows(stream, blocks, active, budget, rows_memory, pass);
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
  LoopRendezvous rendezvous(workers > 1);
  arena.execute([&] {
    tbb::parallel_for(uint32_t{0}, workers, [&](uint32_t r) {
      rendezvous.arrive();
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

}  // namespace

// ---- Over partitions (docs/distributed.md, "poly-2 and kernel spaces") ----
// Every quantity summed over rows is summed per partition
// ("Per partition" above) and the partitions' sums are added in the
// fixed partition tree; every decision (bounds, threshold, candidate pairs,
// top-B with ties to the smaller id) is taken from those sums, identically on
// every rank. Per pass:
//   1. moments: c_j, q_j, w_j = u_j² per partition, reduce-scattered by
//      column ranges. Linear (2γr·c_j²) and square (γ²·q_j²) scores.
//   2. seed: the exact pair sums among the S features of largest u (S = 256,
//      or features.pair_block_features' setting), one sparse tree reduction;
//      θ = the B-th best of the single and seed scores.
//   3. candidates: H = features with u_j·u_max ≥ t, t = √(θ/2γ²) less a
//      certified rounding slack; every pair of H with u_j·u_k ≥ t that
//      co-occurs in a row is summed exactly per partition, one sparse tree
//      reduction. Every pair that can reach θ is among them, so the top-B
//      over singles and candidate pairs is the top-B of the whole space.

namespace {

// A base feature and its pair bound u_j; ranked by decreasing u, ties to the smaller id.
struct BoundedFeature {
  uint64_t id = 0;
  double u = 0;
};
bool bound_before(const BoundedFeature& x, const BoundedFeature& y) { return x.u != y.u ? x.u > y.u : x.id < y.id; }

Poly2ActiveSet active_set(const std::vector<BoundedFeature>& features, double t) {
  Poly2ActiveSet active;
  for (const BoundedFeature& f : features) {
    active.ids.push_back(static_cast<uint32_t>(f.id));
    active.bound.push_back(f.u);
  }
  active.t = t;
  return active;
}

}  // namespace

// Σ over all partitions of each partition's exact sums of the pairs of `active`.
SparseSums Poly2Space::partition_pair_sums(const std::vector<PartitionScoringInput>& parts,
                                           const Poly2ActiveSet& active, SpaceScores& out, Reservation& sums_memory) {
  std::vector<SparseSums> local;
  PassStats pass;
  Reservation held = budget_.reserve(0, "poly2 candidate-pair partials of this rank's partitions",
                                     "use more ranks (more, smaller partitions) or a smaller fgm.B");
  for (const auto& p : parts) {
    local.push_back(poly2_partition_pair_sums(*p.stream, *p.blocks, p.a, active, budget_, &pass, &out.pair_updates));
    held.resize(held.bytes() + local.back().keys.size() * 16);
  }
  out.pass.bytes_streamed += pass.bytes_streamed;
  SparseSums sums = partitions_->sum(local);
  // The received nodes and the result (16 bytes a pair each) while the partials are held.
  sums_memory = budget_.reserve(sums.keys.size() * 16 * (2 + static_cast<uint64_t>(partitions_->comm().size())),
                                "poly2 candidate-pair sums of all partitions",
                                "use more ranks (more, smaller partitions) or a smaller fgm.B");
  return sums;
}

void Poly2Space::offer_pair_sums(const SparseSums& sums, TopBCache& top) const {
  const double cross_scale = 2.0 * gamma_ * gamma_;
  for (size_t e = 0; e < sums.keys.size(); ++e) {
    const double s = cross_scale * sums.values[e] * sums.values[e];
    if (s > 0 && top.may_admit(s) && !selected_.test(sums.keys[e])) top.offer({s, sums.keys[e]});
  }
}

// 1. The moments c_j, q_j, w_j by column ranges: each partition's sparse
// moments (its non-empty columns), one reduce-scatter in the partition tree,
// so rank r holds the global moments of base features [⌊r·m/K⌋, ⌊(r+1)·m/K⌋).
SparseSums Poly2Space::partition_moments(const std::vector<PartitionScoringInput>& parts, SpaceScores& out,
                                         Reservation& memory) {
  // The three keys 3j, 3j + 1, 3j + 2 of each feature j of each rank's range.
  const std::vector<ColumnSpans> wanted = rank_key_ranges(n_features_, partitions_->comm().size(), 3);
  PassStats pass;
  SparseSums moments = partitions_->reduce_scatter(
      [&](size_t q) { return poly2_partition_moments(*parts[q].stream, *parts[q].blocks, parts[q].a, &pass); }, wanted,
      &memory);
  out.pass.bytes_streamed += pass.bytes_streamed;
  memory.resize(16 * moments.keys.size());
  return moments;
}

SpaceScores Poly2Space::score_partitions(const ScoringContext& ctx) {
  const std::vector<PartitionScoringInput>& parts = ctx.parts;
  Communicator& comm = partitions_->comm();
  const uint64_t B = ctx.B;
  SpaceScores out;
  const double lin_scale = 2.0 * gamma_ * coef0_, sq_scale = gamma_ * gamma_;
  Reservation moments_memory = budget_.reserve(0, "poly2 moments of a distributed scoring pass",
                                               "use more ranks (more, smaller partitions) or more memory per rank");
  // Its range's linear and square scores, and its range's features with u_j > 0.
  std::vector<BoundedFeature> range_u;
  TopBCache singles(B, &budget_);
  {
    const SparseSums moments = partition_moments(parts, out, moments_memory);
    for (size_t e = 0; e < moments.keys.size();) {
      const uint64_t j = moments.keys[e] / 3;
      double v[3] = {0, 0, 0};  // c_j, q_j, w_j (a key no partition has is an exact zero)
      for (; e < moments.keys.size() && moments.keys[e] / 3 == j; ++e) v[moments.keys[e] % 3] = moments.values[e];
      const double u = std::sqrt(v[2]), sl = lin_scale * v[0] * v[0], sq = sq_scale * v[1] * v[1];
      const uint64_t lid = poly2_id(kPoly2Linear, j), qid = poly2_id(kPoly2Square, j);
      if (sl > 0 && singles.may_admit(sl) && !selected_.test(lid)) singles.offer({sl, lid});
      if (sq > 0 && singles.may_admit(sq) && !selected_.test(qid)) singles.offer({sq, qid});
      if (u > 0) range_u.push_back({j, u});
    }
    moments_memory.resize(range_u.size() * sizeof(BoundedFeature));
  }
  out.candidates_scored = 2 * n_features_;
  // 2. seed: the S features of largest bound over all ranges (each range's S
  // best, merged in the same order), their pairs summed exactly; θ from them
  // and the singles' top-B (each range's B best, merged: the global B best).
  const size_t range_seed = std::min<size_t>(seed_features_, range_u.size());
  std::partial_sort(range_u.begin(), range_u.begin() + static_cast<std::ptrdiff_t>(range_seed), range_u.end(),
                    bound_before);
  Reservation top_memory;
  std::vector<ScoredCandidate> range_top = singles.take_sorted(&top_memory);
  auto [all_top, seed_list] = allgather_lists(
      comm, range_top,
      std::vector<BoundedFeature>(range_u.begin(), range_u.begin() + static_cast<std::ptrdiff_t>(range_seed)));
  TopBCache top(B, &budget_);
  for (const ScoredCandidate& c : all_top) top.offer(c);
  std::sort(seed_list.begin(), seed_list.end(), bound_before);
  seed_list.resize(std::min<size_t>(seed_features_, seed_list.size()));
  const double u_max = seed_list.empty() ? 0.0 : seed_list.front().u;
  const Poly2ActiveSet seeds = active_set(seed_list, 0);  // every pair of the seed
  double theta = 0;
  Reservation seed_memory, candidate_memory;
  const SparseSums seed_sums = partition_pair_sums(parts, seeds, out, seed_memory);
  {
    TopBCache seeded = top;
    offer_pair_sums(seed_sums, seeded);
    if (seeded.full()) theta = seeded.worst().score;
  }
  // 3. candidates: every pair whose bound can reach θ, summed exactly. H =
  // {j : u_j·u_max ≥ t}, each range's members gathered, by decreasing u.
  const double t = pair_bound_threshold(theta, 2.0 * gamma_ * gamma_, n_rows_);
  std::vector<BoundedFeature> range_active;
  for (const BoundedFeature& f : range_u)
    if (f.u * u_max >= t) range_active.push_back(f);
  Reservation active_memory = budget_.reserve(range_active.size() * sizeof(BoundedFeature), "poly2 active set");
  std::vector<BoundedFeature> all_active = allgather_lists(comm, range_active, std::vector<char>{}).first;
  active_memory.resize(all_active.size() * (sizeof(BoundedFeature) + sizeof(uint32_t) + sizeof(double)));
  std::sort(all_active.begin(), all_active.end(), bound_before);
  Poly2ActiveSet active = active_set(all_active, t);
  // The seed features lead H (both are by decreasing u, and H holds every
  // feature ranked before one of its members): their pairs are summed already.
  while (active.summed_prefix < active.ids.size() && active.summed_prefix < seeds.ids.size() &&
         active.ids[active.summed_prefix] == seeds.ids[active.summed_prefix])
    ++active.summed_prefix;
  const SparseSums candidates = partition_pair_sums(parts, active, out, candidate_memory);
  out.candidates_scored += seed_sums.keys.size() + candidates.keys.size();  // the pairs summed exactly
  offer_pair_sums(seed_sums, top);  // each pair once: the seed's, then the rest of H's
  offer_pair_sums(candidates, top);
  out.top = top.take_sorted(&out.top_memory);
  return out;
}

// √(2γr)·x_j, γ·x_j² or √2·γ·x_j·x_k (as float), as prediction computes them.
std::vector<GeneratedColumn> Poly2Space::columns(const ShardStore& store, uint64_t candidate) {
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
    const float s = static_cast<float>(std::sqrt(2.0 * gamma_ * coef0_));
    for (size_t e = 0; e < rows_a.size(); ++e) {
      rows.push_back(rows_a[e]);
      values.push_back(s * vals_a[e]);
    }
  } else if (kind == kPoly2Square) {
    for (size_t e = 0; e < rows_a.size(); ++e) {
      rows.push_back(rows_a[e]);
      values.push_back(static_cast<float>(gamma_ * vals_a[e] * vals_a[e]));
    }
  } else {
    store.read_column(k, rows_b, vals_b);
    const double s = std::sqrt(2.0) * gamma_;
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

uint64_t Poly2Space::candidate_of(const FeatureKey& key) const {
  if (key.kind == FeatureKind::kCross) return poly2_id(kPoly2Cross, key.ids[0], key.ids[1]);
  return poly2_id(key.kind == FeatureKind::kSquare ? kPoly2Square : kPoly2Linear, key.ids[0]);
}

void Poly2Space::describe(Model& model) const {
  model.feature_kind = "poly2";
  model.gamma = gamma_;
  model.coef0 = coef0_;
}

}  // namespace fgm
