// Sparse synthetic data at scale (issue 3): a kddb-like binary classification
// set with a planted sparse model over linear features and cross pairs, for
// the poly-2 scale benchmark (10^6 rows x 1.5 * 10^7 base features, > 10^14
// poly-2 dimensions, ~29 nonzeros per row).
//
// Rows. Every row is a deterministic function of (seed, split, row index) —
// its own xoshiro256++ stream — so the output is byte-identical for a seed
// whatever the thread count, and any pass can regenerate any row instead of
// keeping it. A row draws K ~ Poisson(nnz_per_row) (at least 1, at most m)
// distinct features:
//  * popularity ranks 1..m are drawn from a Zipf law, P(rank r) ∝ r^-zipf
//    (rejection-inversion sampling, Hörmann & Derflinger 1996: O(1) memory);
//  * after each such draw, with probability `cooccur`, a companion is added:
//    another member of the drawn rank's popularity group (consecutive ranks
//    [g*group_size, (g+1)*group_size)), so that features of similar
//    popularity co-occur far more often than independent draws would make
//    them (as in click and tutoring logs, where features come in bundles);
//  * ranks become feature ids through a keyed pseudo-random permutation of
//    [0, m) (a Feistel network with cycle walking, O(1) memory), so popular
//    features are spread over the id range as in real data, not at its start.
// Values are 1 (`binary`, as in kddb) or k/1000 for k uniform in 1..1000
// (`real`; the text spelling is the shortest one that reads back exactly).
//
// Planted model. y = sign(Σ w_j x_j + Σ w_jk x_j x_k + bias), flipped with
// probability `label_noise`. Weights are ±U(0.5, 1.5). Terms are chosen on a
// pilot: the first min(rows, pilot_rows) training rows (the rows themselves do
// not depend on the model). A term is eligible if the fraction f of pilot rows
// containing it (both features, for a pair) is in [min_term_frequency, 0.5];
// it is "popular" if f >= 10 * min_term_frequency (for a pair: both of its
// features are), else "mid-popularity". Half of the linear features and half
// of the cross pairs (rounded up) are drawn at random from the popular terms,
// the rest from the mid-popularity ones, taking from the other band when one
// runs short (and, failing that, the most frequent remaining terms). Cross
// pairs never involve a planted linear feature, so they are pure interactions.
// The bias is minus the median pilot margin: the threshold is put half-way
// between two distinct pilot margins (the split closest to 50/50), so no row
// sits exactly on it and labels are balanced roughly (a margin value shared by
// many rows, e.g. 0 for rows without any planted term, can skew the balance).
//
// Output in `dir`: train.svm (LIBSVM text, 1-based, "+1"/"-1" labels) or, with
// `store`, dir/store — a column-block store in the format `fgm ingest` writes
// (the same shards, byte for byte, as ingesting train.svm with the same shard
// target and --features m), written directly from the generator without text:
// a counting pass (column counts, labels), then column ranges that fit the
// memory budget are filled by regenerating the rows. test.svm is always text.
// `gzip` writes train.svm.gz / test.svm.gz. truth.txt (see read_truth):
//   # comment lines: the generator settings
//   bias <b>
//   linear <id> <weight>        # <rows>   (1-based ids; rows = training rows
//   cross <j> <k> <weight>      # <rows>    containing the term)
// The store goes through the one store writer (io/store_writer.h), as ingest's
// does: columns in id order, blocks and shards cut by the same rules.
// Memory: the store path holds 4 bytes per feature (column counts: the
// generator draws from all m ids, so this is its own width, not a hashed id
// space), 1 byte per row (labels), the writer's shard buffer, a column buffer
// (4 bytes per nonzero for binary values, 8 for real) of whatever the budget
// leaves, and small per-thread row chunks; the text path only the row chunks. Everything is reserved from the MemoryBudget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "synth/synthetic_data.h"

namespace fgm {

enum class SynthValues { kBinary, kReal };

struct SparseSynthOptions {
  uint64_t rows = 4096;
  uint64_t test_rows = 4096;
  uint64_t features = 4096;          // m
  double nnz_per_row = 29;           // Poisson mean of the row length
  double zipf = 1.05;                // popularity exponent
  double cooccur = 0.3;              // probability that a draw brings a companion
  uint32_t group_size = 4;           // popularity group of companions (1: none)
  uint64_t planted_linear = 20;
  uint64_t planted_cross = 10;
  double min_term_frequency = 0.005; // planted terms occur in at least this share of rows
  SynthValues values = SynthValues::kBinary;
  double label_noise = 0;
  uint64_t seed = 1;
  bool store = false;                // training set as dir/store instead of dir/train.svm
  bool gzip = false;                 // .svm.gz text
  int threads = 1;                   // generation threads (the output does not depend on it)
  uint64_t shard_target_bytes = 0;   // store: 0 = as ingest, min(64 MiB, budget / 8)
  uint32_t tile_rows = 65536;        // store: rows per tile (as ingest's --tile-rows)
  uint64_t block_bytes = 0;          // store: stored block target (0: as ingest)
  uint64_t pilot_rows = 50000;       // rows used to choose the planted terms and the bias
  uint64_t column_buffer_bytes = 0;  // store: cap on the column buffer (0: what the budget
                                     // leaves); a smaller one means more generation passes
};

struct SparseSynthResult {
  PlantedTruth truth;                // ids 0-based
  std::vector<uint64_t> term_rows;   // training rows containing each term: linear, then cross
  uint64_t train_nnz = 0, test_nnz = 0;
  uint64_t train_positive = 0, test_positive = 0;
  uint64_t shards = 0;               // store only
  uint64_t output_bytes = 0;         // training store or text file on disk
  uint64_t generation_passes = 0;    // full passes over the training rows
  double seconds = 0;
  std::string train_path, test_path, truth_path;
};

// Writes the training set, test.svm[.gz] and truth.txt into `dir` (created if
// missing). Throws Error(kConfig) on bad options, kIo on write failures,
// kOutOfMemory if the budget cannot hold the store's fixed arrays.
SparseSynthResult write_sparse_synthetic(const std::string& dir, const SparseSynthOptions& options,
                                         MemoryBudget& budget);

}  // namespace fgm
