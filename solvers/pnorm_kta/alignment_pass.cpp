#include "solvers/pnorm_kta/alignment_pass.h"

#include <algorithm>

#include "core/error.h"

namespace fgm::kta {

AlignmentPass stream_alignments(const BlockStream& stream, const std::vector<BlockRef>& blocks,
                                KernelKind kernel, MemoryBudget& budget) {
  const ShardStore& store = stream.store();
  const StoreInfo& info = store.info();
  const uint64_t n = info.n_rows;
  Reservation labels_memory = budget.reserve(n * sizeof(double), "centred labels of the KTA alignment pass");
  const std::vector<double> unit_labels = centred_unit_labels(store.labels(), n);
  if (unit_labels.empty())
    throw Error(ErrorKind::kInvalidInput, "the store's rows all have one label: no alignment with the target");
  AlignmentPass out;
  // One result per non-empty column of the blocks.
  uint64_t columns = 0;
  for (const BlockRef& ref : blocks) columns += ref.column_count;
  Reservation result_memory =
      budget.reserve(columns * sizeof(FeatureAlignment), "KTA alignments of the features");
  out.features.reserve(columns);
  const CscBytes csc_bytes(info);
  const bool rbf = kernel == KernelKind::kRbf;
  // The RBF grouping of a column is at most its nnz + 1 entries, and a
  // block's largest column is at most the block's nnz.
  auto scratch = [&](const BlockRef& ref) {
    return csc_bytes(ref) + (rbf ? RbfScratch::bytes_for(ref.nnz) : 0) +
           ref.column_count * sizeof(FeatureAlignment);
  };
  out.pass = stream_blocks<std::vector<FeatureAlignment>>(
      stream, blocks, rbf ? "KTA alignments (rbf)" : "KTA alignments (linear)",
      [&](const BlockRef&, const ColumnBlock& block) {
        CscScratch merged;  // reserved by the stream (scratch)
        RbfScratch grouping;
        const CscColumns cols = csc_columns(block, merged);
        std::vector<FeatureAlignment> result;
        result.reserve(cols.column_count);
        for (uint64_t k = 0; k < cols.column_count; ++k) {
          ColumnEntries column;
          column.rows = cols.row_ids + cols.col_ptr[k];
          column.values = cols.values + cols.col_ptr[k];
          column.nnz = cols.col_ptr[k + 1] - cols.col_ptr[k];
          column.col_min = cols.col_min[k];
          column.col_max = cols.col_max[k];
          result.push_back(rbf ? rbf_alignment(cols.column_ids[k], column, unit_labels.data(), n, grouping)
                               : linear_alignment(cols.column_ids[k], column, unit_labels.data(), n));
        }
        return result;
      },
      [&](std::vector<FeatureAlignment>&& result) {
        out.features.insert(out.features.end(), result.begin(), result.end());
      },
      scratch);
  return out;
}

}  // namespace fgm::kta

namespace fgm::kta {

namespace {

// Column `column` restricted to `subset`: its entries renumbered (rows keep
// their order) and col_min/col_max over the subset's rows (implicit zeros
// count when the subset has rows without an entry).
void restrict_column(const ColumnEntries& column, const RowSubset& subset, std::vector<uint32_t>& rows,
                     std::vector<float>& values, ColumnEntries& out) {
  rows.clear();
  values.clear();
  for (uint64_t e = 0; e < column.nnz; ++e) {
    const uint32_t r = subset.local[column.rows[e]];
    if (r == kNotInSubset) continue;
    rows.push_back(r);
    values.push_back(column.values[e]);
  }
  out.rows = rows.data();
  out.values = values.data();
  out.nnz = rows.size();
  float lo = 0, hi = 0;
  if (out.nnz > 0) {
    lo = hi = values[0];
    for (float v : values) lo = std::min(lo, v), hi = std::max(hi, v);
    if (out.nnz < subset.n()) lo = std::min(lo, 0.0f), hi = std::max(hi, 0.0f);
  }
  out.col_min = lo;
  out.col_max = hi;
}

}  // namespace

std::vector<std::vector<FeatureAlignment>> stream_subset_alignments(const BlockStream& stream,
                                                                    const std::vector<BlockRef>& blocks,
                                                                    KernelKind kernel,
                                                                    const std::vector<RowSubset>& subsets,
                                                                    MemoryBudget& budget) {
  const ShardStore& store = stream.store();
  const StoreInfo& info = store.info();
  const size_t k = subsets.size();
  uint64_t label_entries = 0;
  for (const RowSubset& s : subsets) label_entries += s.n();
  Reservation labels_memory = budget.reserve(label_entries * sizeof(double), "centred labels of the KTA folds");
  std::vector<std::vector<double>> unit_labels(k);
  for (size_t s = 0; s < k; ++s) {
    FGM_ASSERT(subsets[s].local.size() == info.n_rows);
    unit_labels[s] = centred_unit_labels(subsets[s].labels.data(), subsets[s].n());
    if (unit_labels[s].empty())
      throw Error(ErrorKind::kInvalidInput, "a fold's training rows all have one label: no alignment with the target");
  }
  uint64_t columns = 0;
  for (const BlockRef& ref : blocks) columns += ref.column_count;
  Reservation result_memory =
      budget.reserve(k * columns * sizeof(FeatureAlignment), "KTA alignments of the features in each fold");
  std::vector<std::vector<FeatureAlignment>> out(k);
  for (auto& v : out) v.reserve(columns);
  const CscBytes csc_bytes(info);
  const bool rbf = kernel == KernelKind::kRbf;
  // Per block in flight: the view, the grouping of its largest column, one
  // restricted copy of a column (8 bytes an entry) and the results.
  auto scratch = [&](const BlockRef& ref) {
    return csc_bytes(ref) + (rbf ? RbfScratch::bytes_for(ref.nnz) : 0) + 8 * ref.nnz +
           k * ref.column_count * sizeof(FeatureAlignment);
  };
  stream_blocks<std::vector<std::vector<FeatureAlignment>>>(
      stream, blocks, rbf ? "KTA fold alignments (rbf)" : "KTA fold alignments (linear)",
      [&](const BlockRef&, const ColumnBlock& block) {
        CscScratch merged;
        RbfScratch grouping;
        std::vector<uint32_t> rows;
        std::vector<float> values;
        const CscColumns cols = csc_columns(block, merged);
        std::vector<std::vector<FeatureAlignment>> result(k);
        for (uint64_t c = 0; c < cols.column_count; ++c) {
          ColumnEntries whole;
          whole.rows = cols.row_ids + cols.col_ptr[c];
          whole.values = cols.values + cols.col_ptr[c];
          whole.nnz = cols.col_ptr[c + 1] - cols.col_ptr[c];
          for (size_t s = 0; s < k; ++s) {
            ColumnEntries column;
            restrict_column(whole, subsets[s], rows, values, column);
            if (column.nnz == 0) continue;  // not stored in the subset's own store
            const uint64_t n = subsets[s].n();
            result[s].push_back(rbf ? rbf_alignment(cols.column_ids[c], column, unit_labels[s].data(), n, grouping)
                                    : linear_alignment(cols.column_ids[c], column, unit_labels[s].data(), n));
          }
        }
        return result;
      },
      [&](std::vector<std::vector<FeatureAlignment>>&& result) {
        for (size_t s = 0; s < k; ++s) out[s].insert(out[s].end(), result[s].begin(), result[s].end());
      },
      scratch);
  return out;
}

}  // namespace fgm::kta
