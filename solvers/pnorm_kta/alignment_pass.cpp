#include "solvers/pnorm_kta/alignment_pass.h"

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
