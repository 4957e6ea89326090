// The streamed passes of SIFS over a column-block store (features/block_stream.h):
// everything that touches the n × m data goes through one of them, so the
// data never has to fit in memory — only per-sample and per-column vectors
// (n·K and m·K doubles) and the reduced problem do.
//
//   column_pass: per weight entry (k, j): Σ_i x_ij G_ik and Σ_i x_ij² H_ik
//                (IFS: ⟨x̄^j, θ⟩ and ‖x̄^j‖ over the free samples; β_max; the
//                reference's dual correlation). Gather per column, tile by tile.
//   row_pass:    per sample and block: Σ_j x_ij c_(k,j) and Σ_j x_ij² mask_(k,j)
//                (ISS: ⟨x̄_i, c⟩ and ‖x̄_i‖ over the free features; α_max).
//                Each block returns its rows' partial sums, added in block order.
//   extract:     the kept columns × kept rows as a row-major matrix (the reduced
//                problem), reserved from the budget as it grows; in the same
//                pass the kept columns' sums Σ_i x_ij G_ik over all rows (the
//                fixed offset z_L of the samples screened into L̂).
//
// Passes touch only what their result needs: a column pass only the columns
// asked for (IFS: those with a free weight), a row pass only the columns with
// a nonzero c or mask entry (ISS: the reference's support and the free
// features); a row pass whose mask is every weight takes the row norms
// computed once (the first ISS trigger of each point needs no norm pass).
// Skipped columns contribute exact zeros, so skipping changes no sum.
//
// Residency (hold_columns): when the store's nonzeros fit the budget they are
// copied once into a column-major array (CSC, rows increasing per column)
// and every pass runs over it in memory, serially, instead of streaming the
// store; the baseline (screening = none) holds its whole problem row-major
// the same way. Held and streamed passes add the same terms in a different
// order (the row sums), so their results agree up to rounding, not bit for bit.
//
// Every sum is a fixed sequence of adds decided by the block plan (column
// sums in tile order; row sums in block order) or by the held columns, so
// results do not depend on engine.threads.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/memory_budget.h"
#include "features/block_stream.h"
#include "solvers/sifs/sifs_problem.h"

namespace fgm {

// Kept rows × kept columns, row-major (rows in increasing sample order,
// columns of a row in increasing reduced index).
struct ReducedMatrix {
  std::vector<uint64_t> row_sample;   // reduced row -> sample i
  std::vector<uint32_t> column_dense; // reduced column -> dense column j
  std::vector<uint64_t> row_ptr;      // rows + 1
  std::vector<uint32_t> col;          // reduced column index
  std::vector<float> val;
  Reservation memory;
  uint64_t nnz() const { return col.size(); }
};

struct SifsPassCounters {
  int column_passes = 0;
  int row_passes = 0;
  int extract_passes = 0;
  int norm_reuses = 0;   // row passes whose norms came from the cached row norms
  int skipped_passes = 0;  // row passes with nothing left to compute (no pass at all)
  double seconds = 0;
  uint64_t bytes_streamed = 0;
  void add(const PassStats& s) {
    seconds += s.seconds;
    bytes_streamed += s.bytes_streamed;
  }
};

// What the screening rules and the path driver need from the data
// (sifs_rules.h, sifs_path.h): the passes, and how sums over samples are
// added up. This process holds the samples of layout() (all of them on a
// single store; its own row partitions in a distributed run,
// engine/distributed_sifs.h), split into parts (row partitions) whose
// per-part sums sum_parts() adds up over every process — in the fixed
// partition tree when distributed, so results do not depend on the rank
// count. Per-weight vectors (K·m) are the same on every process.
class SifsPasses {
 public:
  virtual ~SifsPasses() = default;
  // This process's samples (the coordinates of per-sample vectors).
  virtual const SifsLayout& layout() const = 0;
  virtual uint64_t columns() const = 0;  // m
  uint64_t weights() const { return columns() * layout().blocks(); }  // K·m
  virtual MemoryBudget& budget() const = 0;
  // n and the valid dual coordinates of the whole problem.
  virtual uint64_t total_samples() const = 0;
  virtual uint64_t total_valid_coordinates() const = 0;
  // The parts of layout()'s samples: part q is samples [part_end(q−1), part_end(q)).
  virtual std::vector<uint64_t> part_ends() const = 0;
  // Σ over every part of every process of the parts' `length`-vectors (local: this process's parts, in order).
  virtual std::vector<double> sum_parts(const std::vector<std::vector<double>>& local, size_t length) = 0;
  // The largest `value` of every process (exact).
  virtual double max_over_processes(double value) = 0;
  // Per weight entry, Σ over ALL samples (every process) — see SifsData::column_pass.
  virtual void column_pass(const std::vector<double>& G, const std::vector<double>* H, std::vector<double>& dots,
                           std::vector<double>* squares, const std::vector<uint8_t>* columns = nullptr) = 0;
  // Per sample of layout() — see SifsData::row_pass.
  virtual void row_pass(const std::vector<double>& c, const std::vector<uint8_t>* mask, std::vector<double>& M,
                        std::vector<double>* N) = 0;
};

class SifsData final : public SifsPasses {
 public:
  // One pass lists the non-empty columns (the weight space).
  SifsData(const BlockStream& stream, std::vector<BlockRef> blocks, const SifsLayout& layout,
           MemoryBudget& budget);

  const SifsLayout& layout() const override { return layout_; }
  uint64_t columns() const override { return column_ids_.size(); }  // m
  uint64_t column_id(uint64_t j) const { return column_ids_[j]; }
  MemoryBudget& budget() const override { return budget_; }
  // One process, one part: the part's sums are the sums.
  uint64_t total_samples() const override { return layout_.samples(); }
  uint64_t total_valid_coordinates() const override { return layout_.valid_coordinates(); }
  std::vector<uint64_t> part_ends() const override { return {layout_.samples()}; }
  std::vector<double> sum_parts(const std::vector<std::vector<double>>& local, size_t) override { return local[0]; }
  double max_over_processes(double value) override { return value; }
  SifsPassCounters& counters() { return counters_; }
  const SifsPassCounters& counters() const { return counters_; }

  // Copies the nonzeros into memory (CSC) when they fit in half the free
  // budget; later passes run over that copy. Returns whether it did.
  bool hold_columns();
  bool holds_columns() const { return !held_.ptr.empty(); }
  // Nonzeros of dense column j (held columns only).
  uint64_t held_column_nnz(uint64_t j) const { return held_.ptr[j + 1] - held_.ptr[j]; }

  // dots[k·m + j] = Σ_i x_ij G[i·K + k]; squares (when H is given) likewise
  // with x_ij². With `columns` (per dense column j), only the columns marked
  // are computed; the others are 0.
  void column_pass(const std::vector<double>& G, const std::vector<double>* H, std::vector<double>& dots,
                   std::vector<double>* squares, const std::vector<uint8_t>* columns = nullptr) override;
  // M[i·K + k] = Σ_j x_ij c[k·m + j]; N (when mask is given) = Σ_j x_ij² mask[k·m + j].
  void row_pass(const std::vector<double>& c, const std::vector<uint8_t>* mask, std::vector<double>& M,
                std::vector<double>* N) override;
  // The kept columns (keep_column[j]) of the kept rows (keep_row[i]). With
  // offset_G (n·K), offset_dots[k·m + j] = Σ_i x_ij offset_G[i·K + k] over
  // every row, for the kept columns (0 elsewhere). Throws kOutOfMemory naming
  // the sizes and engine.memory_budget when it does not fit.
  ReducedMatrix extract(const std::vector<uint8_t>& keep_column, const std::vector<uint8_t>& keep_row,
                        const std::vector<double>* offset_G = nullptr, std::vector<double>* offset_dots = nullptr);

 private:
  // The store's nonzeros column by column (dense column j: [ptr[j], ptr[j+1])).
  struct HeldColumns {
    std::vector<uint64_t> ptr;
    std::vector<uint32_t> row;
    std::vector<float> val;
    Reservation memory;
  };

  uint64_t offset_of(const BlockRef& ref) const;
  // extract() over the held columns (out has its rows and columns listed).
  ReducedMatrix held_extract(ReducedMatrix out, const std::vector<uint32_t>& reduced_row,
                             const std::vector<double>* offset_G, std::vector<double>* offset_dots);
  // The blocks of the plan with at least one marked dense column.
  std::vector<BlockRef> blocks_with(const std::vector<uint8_t>& columns) const;
  void row_sums(const std::vector<double>& c, const std::vector<uint8_t>& c_columns, const std::vector<uint8_t>* mask,
                const std::vector<uint8_t>& mask_columns, std::vector<double>& M, std::vector<double>* N);
  void held_row_sums(const std::vector<double>& c, const std::vector<uint8_t>& c_columns,
                     const std::vector<uint8_t>* mask, const std::vector<uint8_t>& mask_columns,
                     std::vector<double>& M, std::vector<double>* N);
  void held_column_sums(const std::vector<double>& G, const std::vector<double>* H, std::vector<double>& dots,
                        std::vector<double>* squares, const std::vector<uint8_t>* columns);

  const BlockStream& stream_;
  std::vector<BlockRef> blocks_;
  const SifsLayout& layout_;
  MemoryBudget& budget_;
  std::vector<uint64_t> column_ids_;
  Reservation ids_memory_;
  std::map<uint64_t, uint64_t> block_offset_;  // BlockRef first_column -> its first dense column
  uint32_t accumulator_rows_ = 0;  // rows of a row-pass tile accumulator: min(tile_rows, n)
  SifsPassCounters counters_;
  HeldColumns held_;
  std::vector<double> row_norms_;  // Σ_j x_ij² per sample (K copies: [i·K + k]), once needed
  Reservation row_norms_memory_;
};

}  // namespace fgm
