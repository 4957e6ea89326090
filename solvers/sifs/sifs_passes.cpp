#include "solvers/sifs/sifs_passes.h"

#include <algorithm>
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

void SifsData::column_pass(const std::vector<double>& G, const std::vector<double>* H, std::vector<double>& dots,
                           std::vector<double>* squares) {
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  FGM_ASSERT(G.size() == layout_.samples() * K);
  dots.assign(m * K, 0.0);
  if (squares) squares->assign(m * K, 0.0);
  const bool with_squares = H != nullptr && squares != nullptr;
  PassStats s = stream_blocks<ColumnPartial>(
      stream_, blocks_, "sifs column pass",
      [&](const BlockRef& ref, const ColumnBlock& b) {
        ColumnPartial out;
        out.offset = offset_of(ref);
        out.columns = b.column_count;
        out.dots.assign(b.column_count * K, 0.0);
        if (with_squares) out.squares.assign(b.column_count * K, 0.0);
        for_each_nonzero(b, [&](uint32_t, uint32_t k, uint32_t row, float value) {
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

void SifsData::row_pass(const std::vector<double>& c, const std::vector<uint8_t>* mask, std::vector<double>& M,
                        std::vector<double>* N) {
  const uint32_t K = layout_.blocks();
  const uint64_t m = columns();
  const uint64_t n = layout_.samples();
  FGM_ASSERT(c.size() == m * K);
  const bool with_norms = mask != nullptr && N != nullptr;
  M.assign(n * K, 0.0);
  if (N) N->assign(n * K, 0.0);
  const uint32_t acc_rows = accumulator_rows_;
  const uint32_t tile_rows = stream_.store().info().tile_rows;
  const uint32_t width = 2 * K;
  PassStats s = stream_blocks<RowPartial>(
      stream_, blocks_, "sifs row pass",
      [&](const BlockRef& ref, const ColumnBlock& b) {
        const uint64_t offset = offset_of(ref);
        RowPartial out;
        std::vector<double> acc(static_cast<uint64_t>(acc_rows) * width, 0.0);
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

ReducedMatrix SifsData::extract(const std::vector<uint8_t>& keep_column, const std::vector<uint8_t>& keep_row) {
  const uint64_t m = columns();
  const uint64_t n = layout_.samples();
  ReducedMatrix out;
  std::vector<uint32_t> reduced_col(m, UINT32_MAX);
  for (uint64_t j = 0; j < m; ++j)
    if (keep_column[j]) reduced_col[j] = static_cast<uint32_t>(out.column_dense.size()), out.column_dense.push_back(static_cast<uint32_t>(j));
  std::vector<uint32_t> reduced_row(n, UINT32_MAX);
  for (uint64_t i = 0; i < n; ++i)
    if (keep_row[i]) reduced_row[i] = static_cast<uint32_t>(out.row_sample.size()), out.row_sample.push_back(i);
  const uint64_t rows = out.row_sample.size();
  const uint64_t cols = out.column_dense.size();
  auto sizes = [&](uint64_t nnz) {
    return std::to_string(cols) + " features x " + std::to_string(rows) + " samples, " + std::to_string(nnz) +
           " nonzeros";
  };
  std::vector<ExtractTriplet> triplets;
  Reservation triplet_memory;
  try {
    out.memory = budget_.reserve((rows + 1) * sizeof(uint64_t) + (rows + cols) * 12, "SIFS reduced problem");
    PassStats s = stream_blocks<std::vector<ExtractTriplet>>(
        stream_, blocks_, "sifs extract",
        [&](const BlockRef& ref, const ColumnBlock& b) {
          const uint64_t offset = offset_of(ref);
          std::vector<ExtractTriplet> kept;
          for_each_nonzero(b, [&](uint32_t, uint32_t k, uint32_t row, float value) {
            const uint32_t rc = reduced_col[offset + k];
            const uint32_t rr = reduced_row[row];
            if (rc != UINT32_MAX && rr != UINT32_MAX) kept.push_back({rr, rc, value});
          });
          return kept;
        },
        [&](std::vector<ExtractTriplet>&& kept) {
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
        [](const BlockRef& ref) { return ref.nnz * sizeof(ExtractTriplet); });
    counters_.add(s);
    ++counters_.extract_passes;
    const uint64_t nnz = triplets.size();
    out.memory.resize(out.memory.bytes() + nnz * (sizeof(uint32_t) + sizeof(float)));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kOutOfMemory) throw;
    throw_error(ErrorKind::kOutOfMemory,
                "the reduced SIFS problem (" + sizes(triplets.size()) + " so far) does not fit engine.memory_budget (" +
                    format_bytes(budget_.limit()) + "): raise engine.memory_budget, or raise sifs.beta_min_ratio / "
                    "sifs.alpha_min_ratio so that screening leaves a smaller problem.\n" + e.what());
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

}  // namespace fgm
