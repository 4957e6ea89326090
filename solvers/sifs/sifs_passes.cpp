#include "solvers/sifs/sifs_passes.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.h"

namespace fgm {
namespace {

// Visits every nonzero of a block tile by tile: f(tile, local column k, row, value).
template <class F>
void for_each_nonzero(const ColumnBlock& b, F&& f) {
  for (uint32_t t = 0; t < b.tile_count; ++t) {
    for (uint32_t c = b.tile_cells[t]; c < b.tile_cells[t + 1]; ++c) {
      const uint32_t k = b.cell_column[c];
      for (uint32_t p = b.cell_ptr[c]; p < b.cell_ptr[c + 1]; ++p) f(t, k, b.row_ids[p], b.values[p]);
    }
  }
}

struct BlockColumns {
  std::vector<uint64_t> ids;
  uint64_t key = 0;
};

struct ColumnPartial {
  uint64_t offset = 0;
  uint64_t columns = 0;
  std::vector<double> dots, squares;  // [local column · K + k]
};

struct RowPartial {
  std::vector<uint32_t> rows;  // increasing
  std::vector<double> values;  // per row: K sums of x·c, then K sums of x²·mask
};

struct ExtractTriplet {
  uint32_t row;
  uint32_t col;
  float value;
};

struct ExtractPartial {
  std::vector<ExtractTriplet> kept;
  uint64_t offset = 0;                // the block's first dense column
  std::vector<double> offset_dots;    // [local column · K + k] (kept columns only)
};

struct HeldBlock {
  uint64_t offset = 0;
  std::vector<uint64_t> ptr;  // local column -> [ptr, ptr + 1)
  std::vector<uint32_t> row;
  std::vector<float> val;
};

// The reduced problem did not fit: the sizes so far, the budget and the keys to change.
[[noreturn]] void throw_reduced_too_big(const Error& e, uint64_t cols, uint64_t rows, uint64_t nnz, uint64_t limit) {
  throw_error(ErrorKind::kOutOfMemory,
              "the reduced SIFS problem (" + std::to_string(cols) + " features x " + std::to_string(rows) +
                  " samples, " + std::to_string(nnz) + " nonzeros so far) does not fit engine.memory_budget (" +
                  format_bytes(limit) + "): raise engine.memory_budget, or raise sifs.beta_min_ratio / "
                  "sifs.alpha_min_ratio so that screening leaves a smaller problem.\n" + e.what());
}

}  // namespace

SifsData::SifsData(const BlockStream& stream, std::vector<BlockRef> blocks, const SifsLayout& layout,
                   MemoryBudget& budget)
    : stream_(stream), blocks_(std::move(blocks)), layout_(layout), budget_(budget) {
  FGM_ASSERT(stream.store().info().n_rows == layout.samples());
  uint64_t listed = 0;
  for (const auto& r : blocks_) listed += r.column_count;
  ids_memory_ = budget.reserve(listed * sizeof(uint64_t), "SIFS column ids");
  column_ids_.reserve(listed);
  PassStats s = stream_blocks<BlockColumns>(
      stream_, blocks_, "sifs columns",
      [](const BlockRef& ref, const ColumnBlock& b) {
        BlockColumns out;
        out.ids.assign(b.column_ids, b.column_ids + b.column_count);
        out.key = ref.first_column;
        return out;
      },
      [&](BlockColumns&& r) {
        block_offset_[r.key] = column_ids_.size();
        column_ids_.insert(column_ids_.end(), r.ids.begin(), r.ids.end());
      },
      [](const BlockRef& ref) { return ref.column_count * sizeof(uint64_t); });
  counters_.add(s);
  const uint64_t tile_rows = std::max<uint64_t>(1, stream.store().info().tile_rows);
  accumulator_rows_ = static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(tile_rows, layout.samples())));
}

uint64_t SifsData::offset_of(const BlockRef& ref) const {
  auto it = block_offset_.find(ref.first_column);
  FGM_ASSERT(it != block_offset_.end());
  return it->second;
}

std::vector<BlockRef> SifsData::blocks_with(const std::vector<uint8_t>& columns) const {
  std::vector<BlockRef> out;
  for (const BlockRef& ref : blocks_) {
    const uint64_t offset = offset_of(ref);
    for (uint64_t k = 0; k < ref.column_count; ++k)
      if (columns[offset + k]) {
        out.push_back(ref);
        break;
      }
  }
  return out;
}

bool SifsData::hold_columns() {
  if (holds_columns()) return true;
  uint64_t nnz = 0;
  for (const auto& r : blocks_) nnz += r.nnz;
  const uint64_t m = columns();
  const uint64_t bytes = nnz * (sizeof(uint32_t) + sizeof(float)) + (m + 1) * sizeof(uint64_t);
  if (bytes > budget_.available() / 2) return false;
  HeldColumns held;
  held.memory = budget_.reserve(bytes, "SIFS store columns held in memory", "set engine.memory_budget higher");
  held.ptr.reserve(m + 1);
  held.ptr.push_back(0);
  held.row.reserve(nnz);
  held.val.reserve(nnz);
  PassStats s = stream_blocks<HeldBlock>(
      stream_, blocks_, "sifs hold columns",
      [&](const BlockRef& ref, const ColumnBlock& b) {
        HeldBlock out;
        out.offset = offset_of(ref);
        out.ptr.assign(b.column_count + 1, 0);
        const uint32_t cells = b.cell_count();
        for (uint32_t c = 0; c < cells; ++c) out.ptr[b.cell_column[c] + 1] += b.cell_ptr[c + 1] - b.cell_ptr[c];
        for (uint64_t k = 0; k < b.column_count; ++k) out.ptr[k + 1] += out.ptr[k];
        out.row.resize(out.ptr.back());
        out.val.resize(out.ptr.back());
        std::vector<uint64_t> cursor(out.ptr.begin(), out.ptr.end() - 1);
        // Tiles in order: each column's rows come out increasing.
        for (uint32_t c = 0; c < cells; ++c)
          for (uint32_t p = b.cell_ptr[c]; p < b.cell_ptr[c + 1]; ++p) {
            const uint64_t q = cursor[b.cell_column[c]]++;
            out.row[q] = b.row_ids[p];
            out.val[q] = b.values[p];
          }
        return out;
      },
      [&](HeldBlock&& r) {
        FGM_ASSERT(held.ptr.size() - 1 == r.offset);
        const uint64_t base = held.row.size();
        for (size_t k = 1; k < r.ptr.size(); ++k) held.ptr.push_back(base + r.ptr[k]);
        held.row.insert(held.row.end(), r.row.begin(), r.row.end());
        held.val.insert(held.val.end(), r.val.begin(), r.val.end());
      },
      [](const BlockRef& ref) { return ref.nnz * 16 + ref.column_count * 16; });
  counters_.add(s);
  FGM_ASSERT(held.ptr.size() == m + 1);
  held_ = std::move(held);
  return true;
}

void SifsData::column_pass(const std::vector<double>& G, const std::vector<double>* H, std::vector<double>& dots,
                           std::vector<double>* squares, const std::vector<uint8_t>* only_columns) {
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  FGM_ASSERT(G.size() == layout_.samples() * K);
  if (holds_columns()) {
    held_column_sums(G, H, dots, squares, only_columns);
    ++counters_.column_passes;
    return;
  }
  dots.assign(m * K, 0.0);
  if (squares) squares->assign(m * K, 0.0);
  const bool with_squares = H != nullptr && squares != nullptr;
  PassStats s = stream_blocks<ColumnPartial>(
      stream_, only_columns ? blocks_with(*only_columns) : blocks_, "sifs column pass",
      [&](const BlockRef& ref, const ColumnBlock& b) {
        ColumnPartial out;
        out.offset = offset_of(ref);
        out.columns = b.column_count;
        out.dots.assign(b.column_count * K, 0.0);
        if (with_squares) out.squares.assign(b.column_count * K, 0.0);
        for_each_nonzero(b, [&](uint32_t, uint32_t k, uint32_t row, float value) {
          if (only_columns && !(*only_columns)[out.offset + k]) return;
          const double x = value;
          const double* g = &G[static_cast<uint64_t>(row) * K];
          double* d = &out.dots[static_cast<uint64_t>(k) * K];
          for (uint32_t c = 0; c < K; ++c) d[c] += x * g[c];
          if (with_squares) {
            const double* h = &(*H)[static_cast<uint64_t>(row) * K];
            double* q = &out.squares[static_cast<uint64_t>(k) * K];
            for (uint32_t c = 0; c < K; ++c) q[c] += x * x * h[c];
          }
        });
        return out;
      },
      [&](ColumnPartial&& r) {
        for (uint64_t k = 0; k < r.columns; ++k)
          for (uint32_t c = 0; c < K; ++c) {
            dots[c * m + r.offset + k] = r.dots[k * K + c];
            if (with_squares) (*squares)[c * m + r.offset + k] = r.squares[k * K + c];
          }
      },
      [K](const BlockRef& ref) { return ref.column_count * K * 2 * sizeof(double); });
  counters_.add(s);
  ++counters_.column_passes;
}

void SifsData::held_column_sums(const std::vector<double>& G, const std::vector<double>* H, std::vector<double>& dots,
                                std::vector<double>* squares, const std::vector<uint8_t>* only_columns) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  const uint64_t n = layout_.samples();
  const bool with_squares = H != nullptr && squares != nullptr;
  dots.assign(m * K, 0.0);
  if (squares) squares->assign(m * K, 0.0);
  if (K == 1) {
    for (uint64_t j = 0; j < m; ++j) {
      if (only_columns && !(*only_columns)[j]) continue;
      double d = 0, q = 0;
      if (with_squares) {
        for (uint64_t p = held_.ptr[j]; p < held_.ptr[j + 1]; ++p) {
          const double x = held_.val[p];
          d += x * G[held_.row[p]];
          q += x * x * (*H)[held_.row[p]];
        }
        (*squares)[j] = q;
      } else {
        for (uint64_t p = held_.ptr[j]; p < held_.ptr[j + 1]; ++p) d += static_cast<double>(held_.val[p]) * G[held_.row[p]];
      }
      dots[j] = d;
    }
  } else {
    // Rows whose coefficients are all zero (every coordinate in R̂) add only zeros: skip them.
    std::vector<uint8_t> active(n, 0);
    for (uint64_t i = 0; i < n; ++i)
      for (uint32_t k = 0; k < K && !active[i]; ++k)
        active[i] = G[i * K + k] != 0 || (with_squares && (*H)[i * K + k] != 0);
    std::vector<double> d(K), q(K);
    for (uint64_t j = 0; j < m; ++j) {
      if (only_columns && !(*only_columns)[j]) continue;
      std::fill(d.begin(), d.end(), 0.0);
      std::fill(q.begin(), q.end(), 0.0);
      for (uint64_t p = held_.ptr[j]; p < held_.ptr[j + 1]; ++p) {
        const uint64_t i = held_.row[p];
        if (!active[i]) continue;
        const double x = held_.val[p];
        const double* g = &G[i * K];
        for (uint32_t k = 0; k < K; ++k) d[k] += x * g[k];
        if (with_squares) {
          const double* h = &(*H)[i * K];
          for (uint32_t k = 0; k < K; ++k) q[k] += x * x * h[k];
        }
      }
      for (uint32_t k = 0; k < K; ++k) {
        dots[k * m + j] = d[k];
        if (with_squares) (*squares)[k * m + j] = q[k];
      }
    }
  }
  counters_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void SifsData::row_pass(const std::vector<double>& c, const std::vector<uint8_t>* mask, std::vector<double>& M,
                        std::vector<double>* N) {
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  const uint64_t n = layout_.samples();
  FGM_ASSERT(c.size() == m * K);
  const bool with_norms = mask != nullptr && N != nullptr;
  std::vector<uint8_t> c_columns(m, 0), mask_columns(m, 0);
  bool any_c = false, full_mask = with_norms;
  for (uint32_t k = 0; k < K; ++k)
    for (uint64_t j = 0; j < m; ++j) {
      if (c[k * m + j] != 0) c_columns[j] = 1, any_c = true;
      if (with_norms) {
        if ((*mask)[k * m + j]) mask_columns[j] = 1;
        else full_mask = false;
      }
    }
  if (with_norms && full_mask && !row_norms_.empty()) {
    // Norms over every feature: computed once, the same sums as a pass would add.
    *N = row_norms_;
    ++counters_.norm_reuses;
    if (!any_c) {
      M.assign(n * K, 0.0);
      ++counters_.skipped_passes;
      return;
    }
    row_sums(c, c_columns, nullptr, mask_columns, M, nullptr);
    return;
  }
  row_sums(c, c_columns, with_norms ? mask : nullptr, mask_columns, M, with_norms ? N : nullptr);
  if (with_norms && full_mask) {
    row_norms_memory_ = budget_.reserve(n * K * sizeof(double), "SIFS row norms");
    row_norms_ = *N;
  }
}

void SifsData::row_sums(const std::vector<double>& c, const std::vector<uint8_t>& c_columns,
                        const std::vector<uint8_t>* mask, const std::vector<uint8_t>& mask_columns,
                        std::vector<double>& M, std::vector<double>* N) {
  if (holds_columns()) {
    held_row_sums(c, c_columns, mask, mask_columns, M, N);
    ++counters_.row_passes;
    return;
  }
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  const uint64_t n = layout_.samples();
  const bool with_norms = mask != nullptr && N != nullptr;
  M.assign(n * K, 0.0);
  if (N) N->assign(n * K, 0.0);
  std::vector<uint8_t> needed(m);
  for (uint64_t j = 0; j < m; ++j) needed[j] = c_columns[j] || (with_norms && mask_columns[j]);
  const uint32_t acc_rows = accumulator_rows_;
  const uint32_t tile_rows = stream_.store().info().tile_rows;
  const uint32_t width = 2 * K;
  // Tile accumulators (acc_rows · 2K doubles, zero between uses) are taken from
  // a pool for the pass rather than allocated per block: a multi-class block
  // would otherwise allocate and clear n·2K doubles.
  std::mutex pool_mutex;
  std::vector<std::unique_ptr<std::vector<double>>> pool;
  auto take = [&]() {
    std::lock_guard<std::mutex> lock(pool_mutex);
    if (pool.empty()) return std::make_unique<std::vector<double>>(static_cast<uint64_t>(acc_rows) * width, 0.0);
    auto a = std::move(pool.back());
    pool.pop_back();
    return a;
  };
  auto give_back = [&](std::unique_ptr<std::vector<double>> a) {
    std::lock_guard<std::mutex> lock(pool_mutex);
    pool.push_back(std::move(a));
  };
  PassStats s = stream_blocks<RowPartial>(
      stream_, blocks_with(needed), "sifs row pass",
      [&](const BlockRef& ref, const ColumnBlock& b) {
        const uint64_t offset = offset_of(ref);
        RowPartial out;
        std::unique_ptr<std::vector<double>> held_acc = take();
        std::vector<double>& acc = *held_acc;
        std::vector<uint8_t> touched(acc_rows, 0);
        std::vector<uint32_t> touched_rows;
        auto flush = [&](uint32_t tile) {
          std::sort(touched_rows.begin(), touched_rows.end());
          for (uint32_t r : touched_rows) {
            out.rows.push_back(tile * tile_rows + r);
            double* a = &acc[static_cast<uint64_t>(r) * width];
            out.values.insert(out.values.end(), a, a + width);
            std::fill(a, a + width, 0.0);
            touched[r] = 0;
          }
          touched_rows.clear();
        };
        for (uint32_t t = 0; t < b.tile_count; ++t) {
          for (uint32_t cell = b.tile_cells[t]; cell < b.tile_cells[t + 1]; ++cell) {
            const uint64_t j = offset + b.cell_column[cell];
            if (!needed[j]) continue;
            for (uint32_t p = b.cell_ptr[cell]; p < b.cell_ptr[cell + 1]; ++p) {
              const uint32_t r = b.row_ids[p] - t * tile_rows;
              if (!touched[r]) touched[r] = 1, touched_rows.push_back(r);
              const double x = b.values[p];
              double* a = &acc[static_cast<uint64_t>(r) * width];
              for (uint32_t k = 0; k < K; ++k) {
                a[k] += x * c[k * m + j];
                if (with_norms) a[K + k] += x * x * static_cast<double>((*mask)[k * m + j]);
              }
            }
          }
          flush(t);
        }
        give_back(std::move(held_acc));
        return out;
      },
      [&](RowPartial&& r) {
        for (size_t q = 0; q < r.rows.size(); ++q) {
          const uint64_t i = r.rows[q];
          const double* v = &r.values[q * width];
          for (uint32_t k = 0; k < K; ++k) {
            M[i * K + k] += v[k];
            if (with_norms) (*N)[i * K + k] += v[K + k];
          }
        }
      },
      [acc_rows, width, n](const BlockRef& ref) {
        const uint64_t out_rows = std::min<uint64_t>(ref.nnz, n);
        return static_cast<uint64_t>(acc_rows) * (width * sizeof(double) + 5) + out_rows * (4 + width * sizeof(double));
      });
  counters_.add(s);
  ++counters_.row_passes;
}

void SifsData::held_row_sums(const std::vector<double>& c, const std::vector<uint8_t>& c_columns,
                             const std::vector<uint8_t>* mask, const std::vector<uint8_t>& mask_columns,
                             std::vector<double>& M, std::vector<double>* N) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  const uint64_t n = layout_.samples();
  const bool with_norms = mask != nullptr && N != nullptr;
  M.assign(n * K, 0.0);
  if (N) N->assign(n * K, 0.0);
  std::vector<double> cj(K), mj(K);
  for (uint64_t j = 0; j < m; ++j) {
    const bool dc = c_columns[j] != 0, dm = with_norms && mask_columns[j];
    if (!dc && !dm) continue;
    for (uint32_t k = 0; k < K; ++k) {
      cj[k] = c[k * m + j];
      mj[k] = with_norms ? static_cast<double>((*mask)[k * m + j]) : 0.0;
    }
    for (uint64_t p = held_.ptr[j]; p < held_.ptr[j + 1]; ++p) {
      const uint64_t i = held_.row[p];
      const double x = held_.val[p];
      if (dc)
        for (uint32_t k = 0; k < K; ++k) M[i * K + k] += x * cj[k];
      if (dm)
        for (uint32_t k = 0; k < K; ++k) (*N)[i * K + k] += x * x * mj[k];
    }
  }
  counters_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

ReducedMatrix SifsData::extract(const std::vector<uint8_t>& keep_column, const std::vector<uint8_t>& keep_row,
                               const std::vector<double>* offset_G, std::vector<double>* offset_dots) {
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  const uint64_t n = layout_.samples();
  const bool with_offset = offset_G != nullptr && offset_dots != nullptr;
  if (with_offset) offset_dots->assign(m * K, 0.0);
  ReducedMatrix out;
  std::vector<uint32_t> reduced_col(m, UINT32_MAX);
  for (uint64_t j = 0; j < m; ++j)
    if (keep_column[j]) reduced_col[j] = static_cast<uint32_t>(out.column_dense.size()), out.column_dense.push_back(static_cast<uint32_t>(j));
  std::vector<uint32_t> reduced_row(n, UINT32_MAX);
  for (uint64_t i = 0; i < n; ++i)
    if (keep_row[i]) reduced_row[i] = static_cast<uint32_t>(out.row_sample.size()), out.row_sample.push_back(i);
  const uint64_t rows = out.row_sample.size();
  const uint64_t cols = out.column_dense.size();
  if (holds_columns()) return held_extract(std::move(out), reduced_row, offset_G, offset_dots);
  std::vector<ExtractTriplet> triplets;
  Reservation triplet_memory;
  try {
    out.memory = budget_.reserve((rows + 1) * sizeof(uint64_t) + (rows + cols) * 12, "SIFS reduced problem");
    PassStats s = stream_blocks<ExtractPartial>(
        stream_, blocks_with(keep_column), "sifs extract",
        [&](const BlockRef& ref, const ColumnBlock& b) {
          ExtractPartial part;
          part.offset = offset_of(ref);
          if (with_offset) part.offset_dots.assign(b.column_count * K, 0.0);
          for_each_nonzero(b, [&](uint32_t, uint32_t k, uint32_t row, float value) {
            const uint32_t rc = reduced_col[part.offset + k];
            if (rc == UINT32_MAX) return;
            const uint32_t rr = reduced_row[row];
            if (rr != UINT32_MAX) part.kept.push_back({rr, rc, value});
            if (with_offset) {
              const double x = value;
              const double* g = &(*offset_G)[static_cast<uint64_t>(row) * K];
              double* d = &part.offset_dots[static_cast<uint64_t>(k) * K];
              for (uint32_t c = 0; c < K; ++c) d[c] += x * g[c];
            }
          });
          return part;
        },
        [&](ExtractPartial&& part) {
          if (with_offset)
            for (uint64_t k = 0; k < part.offset_dots.size() / K; ++k)
              for (uint32_t c = 0; c < K; ++c) (*offset_dots)[c * m + part.offset + k] = part.offset_dots[k * K + c];
          std::vector<ExtractTriplet>& kept = part.kept;
          if (kept.empty()) return;
          const uint64_t need = (triplets.size() + kept.size()) * sizeof(ExtractTriplet);
          if (need > triplet_memory.bytes()) {
            if (triplet_memory.bytes() == 0)
              triplet_memory = budget_.reserve(std::max<uint64_t>(need, 4096), "SIFS reduced problem (assembly)");
            else
              triplet_memory.resize(std::max<uint64_t>(need, triplet_memory.bytes() * 3 / 2));
          }
          triplets.insert(triplets.end(), kept.begin(), kept.end());
        },
        [K, with_offset](const BlockRef& ref) {
          return ref.nnz * sizeof(ExtractTriplet) + (with_offset ? ref.column_count * K * sizeof(double) : 0);
        });
    counters_.add(s);
    ++counters_.extract_passes;
    const uint64_t nnz = triplets.size();
    out.memory.resize(out.memory.bytes() + nnz * (sizeof(uint32_t) + sizeof(float)));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    throw_reduced_too_big(e, cols, rows, triplets.size(), budget_.limit());
  }
  // Stable counting sort by row keeps each row's columns increasing (blocks
  // come in column order; inside a block a row's cells are in column order).
  out.row_ptr.assign(rows + 1, 0);
  for (const auto& t : triplets) ++out.row_ptr[t.row + 1];
  for (uint64_t r = 0; r < rows; ++r) out.row_ptr[r + 1] += out.row_ptr[r];
  out.col.resize(triplets.size());
  out.val.resize(triplets.size());
  std::vector<uint64_t> cursor(out.row_ptr.begin(), out.row_ptr.end() - 1);
  for (const auto& t : triplets) {
    const uint64_t q = cursor[t.row]++;
    out.col[q] = t.col;
    out.val[q] = t.value;
  }
  return out;
}

ReducedMatrix SifsData::held_extract(ReducedMatrix out, const std::vector<uint32_t>& reduced_row,
                                     const std::vector<double>* offset_G, std::vector<double>* offset_dots) {
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  const bool with_offset = offset_G != nullptr && offset_dots != nullptr;
  const uint64_t rows = out.row_sample.size();
  const uint64_t cols = out.column_dense.size();
  const auto t0 = std::chrono::steady_clock::now();
  out.row_ptr.assign(rows + 1, 0);
  for (uint64_t c = 0; c < cols; ++c) {
    const uint64_t j = out.column_dense[c];
    for (uint64_t p = held_.ptr[j]; p < held_.ptr[j + 1]; ++p)
      if (reduced_row[held_.row[p]] != UINT32_MAX) ++out.row_ptr[reduced_row[held_.row[p]] + 1];
  }
  for (uint64_t r = 0; r < rows; ++r) out.row_ptr[r + 1] += out.row_ptr[r];
  const uint64_t nnz = out.row_ptr[rows];
  try {
    out.memory = budget_.reserve((rows + 1) * sizeof(uint64_t) + (rows + cols) * 12 +
                                     nnz * (sizeof(uint32_t) + sizeof(float)),
                                 "SIFS reduced problem");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    throw_reduced_too_big(e, cols, rows, nnz, budget_.limit());
  }
  out.col.resize(nnz);
  out.val.resize(nnz);
  std::vector<uint64_t> cursor(out.row_ptr.begin(), out.row_ptr.end() - 1);
  std::vector<double> d(K);
  // Columns in increasing order: each row's columns come out increasing;
  // the offset sums add the rows in increasing order, as a column pass does.
  for (uint64_t c = 0; c < cols; ++c) {
    const uint64_t j = out.column_dense[c];
    std::fill(d.begin(), d.end(), 0.0);
    for (uint64_t p = held_.ptr[j]; p < held_.ptr[j + 1]; ++p) {
      const uint32_t i = held_.row[p];
      const uint32_t rr = reduced_row[i];
      if (rr != UINT32_MAX) {
        const uint64_t q = cursor[rr]++;
        out.col[q] = static_cast<uint32_t>(c);
        out.val[q] = held_.val[p];
      }
      if (with_offset) {
        const double x = held_.val[p];
        const double* g = &(*offset_G)[static_cast<uint64_t>(i) * K];
        for (uint32_t k = 0; k < K; ++k) d[k] += x * g[k];
      }
    }
    if (with_offset)
      for (uint32_t k = 0; k < K; ++k) (*offset_dots)[k * m + j] = d[k];
  }
  ++counters_.extract_passes;
  counters_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace fgm
