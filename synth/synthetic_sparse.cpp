// Sparse synthetic generator: see synth/synthetic_sparse.h for the model.
//
// Passes (each over row chunks in a oneTBB pipeline: serial source ->
// parallel generation -> serial in-order consumer, so the output does not
// depend on the thread count):
//  1. pilot: counts of popularity ranks, then of co-occurring frequent pairs,
//     then the pilot margins -> planted terms, weights and bias;
//  2. text: rows are formatted in parallel and written in order; or
//     store: a counting pass (column counts, labels, term rows), the shard plan
//     (ingest's cut rule), then per group of shards that fits the column
//     buffer a pass that regenerates the rows and scatters the group's entries
//     (rows arrive in order, so every column's row ids come out sorted);
//  3. test rows (text), truth.txt.
#include "synth/synthetic_sparse.h"

#include <fmt/format.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/iostreams/device/file_descriptor.hpp>
#include <boost/iostreams/filter/gzip.hpp>
#include <boost/iostreams/filtering_stream.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <unordered_map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/ingest.h"
#include "io/shard_store.h"
#include "io/store_files.h"
#include "io/store_format.h"
#include "io/store_writer.h"

namespace fs = std::filesystem;

namespace fgm {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;
constexpr uint64_t kChunkRows = 1024;
constexpr uint64_t kStreamTrain = 0x747261696e, kStreamTest = 0x74657374, kStreamModel = 0x6d6f64656c,
                   kStreamPermutation = 0x7065726d;
constexpr double kMaxTermFrequency = 0.5;
constexpr double kPopularFactor = 10;  // popular: frequency >= 10 * min_term_frequency
constexpr uint64_t kPilotRankCap = uint64_t{1} << 20;  // ranks counted on the pilot
const char* kRemedy = "lower --threads";

// ------------------------------------------------------------------ randomness

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// xoshiro256++ (Blackman & Vigna), seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      s = mix64(seed);
    }
  }
  uint64_t next() {
    uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  uint64_t s_[4];
};

inline uint64_t row_seed(uint64_t seed, uint64_t stream, uint64_t row) {
  return mix64(mix64(mix64(seed) ^ stream) + row);
}

// Zipf ranks 1..n with P(k) ∝ k^-s by rejection-inversion (Hörmann &
// Derflinger 1996, as in Apache Commons RNG): O(1) memory and expected time.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s) : n_(n), s_(s) {
    h_x1_ = h_integral(1.5) - 1.0;
    h_n_ = h_integral(static_cast<double>(n) + 0.5);
    shift_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
  }
  uint64_t operator()(Rng& rng) const {
    for (;;) {
      double u = h_n_ + rng.uniform() * (h_x1_ - h_n_);
      double x = h_integral_inverse(u);
      double kd = std::floor(x + 0.5);
      uint64_t k = kd < 1 ? 1 : kd >= static_cast<double>(n_) ? n_ : static_cast<uint64_t>(kd);
      double kf = static_cast<double>(k);
      if (kf - x <= shift_ || u >= h_integral(kf + 0.5) - h(kf)) return k;
    }
  }

 private:
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  double h_integral(double x) const {
    double lx = std::log(x);
    return helper2((1.0 - s_) * lx) * lx;
  }
  double h_integral_inverse(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;
    return std::exp(helper1(t) * x);
  }
  static double helper1(double x) {  // log1p(x) / x
    return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) {  // expm1(x) / x
    return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
  }
  uint64_t n_;
  double s_, h_x1_ = 0, h_n_ = 0, shift_ = 0;
};

// A keyed bijection of [0, n): a 4-round Feistel network on the smallest even
// bit width covering n, with cycle walking (fewer than 4 rounds trips expected).
class Permutation {
 public:
  Permutation(uint64_t n, uint64_t key) : n_(n) {
    int bits = 2;
    while (bits < 64 && (uint64_t{1} << bits) < n) bits += 2;
    half_ = bits / 2;
    mask_ = (uint64_t{1} << half_) - 1;
    for (auto& k : keys_) k = mix64(key += 0x9E3779B97F4A7C15ull);
  }
  uint64_t operator()(uint64_t x) const {
    do x = encrypt(x);
    while (x >= n_);
    return x;
  }

 private:
  uint64_t encrypt(uint64_t x) const {
    uint64_t l = x >> half_, r = x & mask_;
    for (uint64_t k : keys_) {
      uint64_t t = l ^ (mix64(r ^ k) & mask_);
      l = r;
      r = t;
    }
    return (l << half_) | r;
  }
  uint64_t n_;
  int half_ = 1;
  uint64_t mask_ = 1;
  uint64_t keys_[4];
};

// ------------------------------------------------------------------ the model

struct PlantedModel {
  std::vector<uint64_t> ids;      // every feature in a term, sorted
  std::vector<int32_t> linear;    // per id: linear term index, or -1
  struct Cross {
    uint32_t a, b;  // indices into ids
    double w;
  };
  std::vector<Cross> cross;       // term index = linear_count + position
  std::vector<double> linear_w;   // per linear term (in id order)
  uint64_t linear_count = 0;
  double bias = 0;
  uint64_t terms() const { return linear_count + cross.size(); }
};

struct Scratch {
  std::vector<uint64_t> ranks;
  std::vector<std::pair<uint64_t, uint64_t>> entries;  // (id, rank)
  std::vector<double> present;                         // per planted id: value or 0
  std::vector<uint8_t> hit;                            // per term
};

// Rows of one chunk, CSR, plus whatever the pass derives from them.
struct Chunk {
  uint64_t first = 0, count = 0;
  std::vector<uint32_t> row_ptr;
  std::vector<uint64_t> ids, ranks;
  std::vector<double> values;
  std::vector<double> margins;
  std::vector<int8_t> labels;
  std::vector<uint32_t> term_rows;
  fmt::memory_buffer text;
  struct Entry {
    uint64_t column;
    uint32_t row;
    float value;
  };
  std::vector<Entry> entries;  // store fill pass: the entries inside the current columns
  Scratch scratch;
};

class RowGenerator {
 public:
  explicit RowGenerator(const SparseSynthOptions& o)
      : o_(o),
        zipf_(o.features, o.zipf),
        permutation_(o.features, mix64(o.seed ^ kStreamPermutation)),
        exp_neg_mean_(std::exp(-o.nnz_per_row)) {}

  const PlantedModel& model() const { return model_; }
  void set_model(PlantedModel m) { model_ = std::move(m); }
  uint64_t feature_of_rank(uint64_t rank) const { return permutation_(rank); }

  // Appends row `r` of `stream` to the chunk's CSR (ids sorted) and returns
  // the uniform draw that decides a label flip.
  double generate(uint64_t stream, uint64_t r, Chunk& c, bool keep_ranks) const {
    Rng rng(row_seed(o_.seed, stream, r));
    const double noise = rng.uniform();
    uint64_t k = std::clamp<uint64_t>(poisson(rng), 1, o_.features);
    Scratch& s = c.scratch;
    s.ranks.clear();
    auto add = [&](uint64_t rank) {
      if (std::find(s.ranks.begin(), s.ranks.end(), rank) == s.ranks.end()) s.ranks.push_back(rank);
    };
    const bool companions = o_.group_size > 1 && o_.cooccur > 0;
    const uint64_t limit = 64 * k + 64;  // tiny m: give up on distinctness eventually
    for (uint64_t attempt = 0; s.ranks.size() < k && attempt < limit; ++attempt) {
      uint64_t a = zipf_(rng) - 1;
      add(a);
      if (companions && s.ranks.size() < k && rng.uniform() < o_.cooccur) {
        uint64_t g0 = a - a % o_.group_size;
        uint64_t size = std::min<uint64_t>(o_.group_size, o_.features - g0);
        if (size > 1) {
          uint64_t b = g0 + rng.below(size - 1);
          if (b >= a) ++b;
          add(b);
        }
      }
    }
    s.entries.clear();
    for (uint64_t rank : s.ranks) s.entries.emplace_back(permutation_(rank), rank);
    std::sort(s.entries.begin(), s.entries.end());
    for (const auto& [id, rank] : s.entries) {
      c.ids.push_back(id);
      if (keep_ranks) c.ranks.push_back(rank);
      c.values.push_back(o_.values == SynthValues::kBinary
                             ? 1.0
                             : static_cast<double>(1 + rng.below(1000)) / 1000.0);
    }
    c.row_ptr.push_back(static_cast<uint32_t>(c.ids.size()));
    return noise;
  }

  // Margin of the planted model (without the bias) for CSR entries [b, e);
  // marks the terms present in s.hit.
  double margin(const Chunk& c, uint64_t b, uint64_t e, Scratch& s) const {
    const PlantedModel& m = model_;
    s.present.assign(m.ids.size(), 0.0);
    s.hit.assign(m.terms(), 0);
    size_t p = 0;
    bool any = false;
    for (uint64_t i = b; i < e && p < m.ids.size(); ++i) {
      while (p < m.ids.size() && m.ids[p] < c.ids[i]) ++p;
      if (p < m.ids.size() && m.ids[p] == c.ids[i]) {
        s.present[p] = c.values[i];
        any = true;
      }
    }
    if (!any) return 0.0;
    double sum = 0;
    for (size_t q = 0; q < m.ids.size(); ++q)
      if (m.linear[q] >= 0 && s.present[q] != 0) {
        sum += m.linear_w[static_cast<size_t>(m.linear[q])] * s.present[q];
        s.hit[static_cast<size_t>(m.linear[q])] = 1;
      }
    for (size_t t = 0; t < m.cross.size(); ++t) {
      const auto& x = m.cross[t];
      if (s.present[x.a] != 0 && s.present[x.b] != 0) {
        sum += x.w * s.present[x.a] * s.present[x.b];
        s.hit[m.linear_count + t] = 1;
      }
    }
    return sum;
  }

  int8_t label(double margin, double noise) const {
    bool positive = margin + model_.bias > 0;
    if (noise < o_.label_noise) positive = !positive;
    return positive ? 1 : -1;
  }

 private:
  uint64_t poisson(Rng& rng) const {
    const double mean = o_.nnz_per_row;
    if (mean <= 64) {  // Knuth: multiply uniforms until below e^-mean
      uint64_t k = 0;
      double p = 1.0 - rng.uniform();
      while (p > exp_neg_mean_) {
        ++k;
        p *= 1.0 - rng.uniform();
      }
      return k;
    }
    double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();
    double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    double k = std::round(mean + std::sqrt(mean) * z);
    return k < 0 ? 0 : static_cast<uint64_t>(k);
  }

  const SparseSynthOptions& o_;
  ZipfSampler zipf_;
  Permutation permutation_;
  double exp_neg_mean_;
  PlantedModel model_;
};

// ------------------------------------------------------------------ passes

// Runs work(chunk) in parallel and consume(chunk) in row order over rows
// [0, rows) of one stream. Chunks are reused across passes.
class ChunkRunner {
 public:
  ChunkRunner(int threads, MemoryBudget& budget, double nnz_per_row)
      : arena_(threads), tokens_(2 * threads + 1) {
    // Rough upper bound of a chunk's buffers (CSR, entries, text).
    uint64_t per_chunk = kChunkRows * static_cast<uint64_t>(nnz_per_row * 1.5 + 8) * 48;
    reservation_ = budget.reserve(per_chunk * static_cast<uint64_t>(tokens_), "synth row chunks",
                                  kRemedy);
  }

  template <class Work, class Consume>
  void run(uint64_t rows, Work&& work, Consume&& consume) {
    uint64_t next = 0;
    arena_.execute([&] {
      tbb::parallel_pipeline(
          static_cast<size_t>(tokens_),
          tbb::make_filter<void, Chunk*>(tbb::filter_mode::serial_in_order,
                                         [&](tbb::flow_control& fc) -> Chunk* {
                                           if (next >= rows) {
                                             fc.stop();
                                             return nullptr;
                                           }
                                           Chunk* c = take();
                                           c->first = next;
                                           c->count = std::min(kChunkRows, rows - next);
                                           next += c->count;
                                           return c;
                                         }) &
              tbb::make_filter<Chunk*, Chunk*>(tbb::filter_mode::parallel,
                                               [&](Chunk* c) {
                                                 try {
                                                   work(*c);
                                                 } catch (...) {
                                                   give_back(c);
                                                   throw;
                                                 }
                                                 return c;
                                               }) &
              tbb::make_filter<Chunk*, void>(tbb::filter_mode::serial_in_order, [&](Chunk* c) {
                struct GiveBack {
                  ChunkRunner& r;
                  Chunk* c;
                  ~GiveBack() { r.give_back(c); }
                } give_back_on_exit{*this, c};
                consume(*c);
              }));
    });
  }

 private:
  Chunk* take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) {
      all_.push_back(std::make_unique<Chunk>());
      return all_.back().get();
    }
    Chunk* c = free_.back();
    free_.pop_back();
    return c;
  }
  void give_back(Chunk* c) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(c);
  }

  tbb::task_arena arena_;
  int tokens_;
  Reservation reservation_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Chunk>> all_;
  std::vector<Chunk*> free_;
};

// Generates the chunk's rows; with `model`, also margins, labels and term hits.
void generate_chunk(const RowGenerator& g, uint64_t stream, Chunk& c, bool keep_ranks, bool model) {
  c.row_ptr.assign(1, 0);
  c.ids.clear();
  c.ranks.clear();
  c.values.clear();
  c.margins.clear();
  c.labels.clear();
  c.term_rows.assign(model ? g.model().terms() : 0, 0);
  for (uint64_t i = 0; i < c.count; ++i) {
    double noise = g.generate(stream, c.first + i, c, keep_ranks);
    if (!model) continue;
    double m = g.margin(c, c.row_ptr[i], c.row_ptr[i + 1], c.scratch);
    c.margins.push_back(m);
    c.labels.push_back(g.label(m, noise));
    for (size_t t = 0; t < c.term_rows.size(); ++t) c.term_rows[t] += c.scratch.hit[t];
  }
}

// ------------------------------------------------------------------ text output

// LIBSVM text into <path>.tmp, plain or gzip, renamed into place by commit().
class TextOut {
 public:
  TextOut(std::string path, bool gzip) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    if (gzip) {
      namespace io = boost::iostreams;
      try {
        gz_ = std::make_unique<io::filtering_ostream>();
        gz_->push(io::gzip_compressor(io::gzip_params(io::gzip::best_speed)));
        gz_->push(io::file_descriptor_sink(tmp_, std::ios::binary | std::ios::trunc));
      } catch (const std::exception& e) {
        throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, e.what()));
      }
    } else {
      file_ = std::fopen(tmp_.c_str(), "wb");
      if (!file_) throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, store::errno_text(errno)));
      std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
    }
  }
  ~TextOut() {
    if (committed_) return;
    gz_.reset();
    if (file_) std::fclose(file_);
    std::remove(tmp_.c_str());
  }
  void write(const char* data, size_t n) {
    text_bytes_ += n;
    if (gz_) {
      gz_->write(data, static_cast<std::streamsize>(n));
      if (!*gz_) throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, "write failed"));
    } else if (std::fwrite(data, 1, n, file_) != n) {
      throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, store::errno_text(errno)));
    }
  }
  void commit() {
    if (gz_) {
      gz_->flush();
      bool ok = static_cast<bool>(*gz_);
      gz_->reset();  // closes the compressor (writes the trailer) and the file
      if (!ok) throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, "write failed"));
    } else {
      int rc = std::fclose(file_);
      file_ = nullptr;
      if (rc != 0) throw Error(ErrorKind::kIo, msg::cannot_write(tmp_, store::errno_text(errno)));
    }
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw Error(ErrorKind::kIo, msg::cannot_write(path_, store::errno_text(errno)));
    committed_ = true;
  }
  uint64_t text_bytes() const { return text_bytes_; }

 private:
  std::string path_, tmp_;
  FILE* file_ = nullptr;
  std::unique_ptr<boost::iostreams::filtering_ostream> gz_;
  uint64_t text_bytes_ = 0;
  bool committed_ = false;
};

void format_chunk(Chunk& c) {
  c.text.clear();
  auto out = std::back_inserter(c.text);
  for (uint64_t i = 0; i < c.count; ++i) {
    c.text.append(std::string_view(c.labels[i] > 0 ? "+1" : "-1"));
    for (uint32_t e = c.row_ptr[i]; e < c.row_ptr[i + 1]; ++e) {
      c.text.push_back(' ');
      fmt::format_int id(c.ids[e] + 1);
      c.text.append(id.data(), id.data() + id.size());
      c.text.push_back(':');
      if (c.values[e] == 1.0)
        c.text.push_back('1');
      else
        fmt::format_to(out, "{}", c.values[e]);  // shortest spelling that reads back exactly
    }
    c.text.push_back('\n');
  }
}

struct TextSplit {
  uint64_t nnz = 0, positive = 0, bytes = 0;
  std::vector<uint64_t> term_rows;
};

TextSplit write_text_split(ChunkRunner& runner, const RowGenerator& g, uint64_t stream,
                           uint64_t rows, const std::string& path, bool gzip) {
  TextOut out(path, gzip);
  TextSplit s;
  s.term_rows.assign(g.model().terms(), 0);
  runner.run(
      rows,
      [&](Chunk& c) {
        generate_chunk(g, stream, c, false, true);
        format_chunk(c);
      },
      [&](Chunk& c) {
        out.write(c.text.data(), c.text.size());
        s.nnz += c.ids.size();
        for (int8_t y : c.labels) s.positive += y > 0;
        for (size_t t = 0; t < s.term_rows.size(); ++t) s.term_rows[t] += c.term_rows[t];
      });
  out.commit();
  s.bytes = store::file_size_of(path);
  return s;
}

// ------------------------------------------------------------------ pilot

struct Candidate {
  uint64_t a, b;  // ranks (b unused for linear terms)
  uint32_t rows;
  bool popular;
};

// k of `pool` at random (the pool is reordered); the chosen ones are removed.
std::vector<Candidate> take_random(std::vector<Candidate>& pool, uint64_t k, Rng& rng) {
  std::vector<Candidate> chosen;
  while (chosen.size() < k && !pool.empty()) {
    uint64_t i = rng.below(pool.size());
    chosen.push_back(pool[i]);
    pool[i] = pool.back();
    pool.pop_back();
  }
  return chosen;
}

// Half (rounded up) from the popular candidates, the rest from the others;
// a short band is made up from the other one, then from `fallback` (most
// frequent first).
std::vector<Candidate> choose_terms(std::vector<Candidate> candidates,
                                    std::vector<Candidate> fallback, uint64_t k, Rng& rng,
                                    const char* what, double min_frequency) {
  auto by_key = [](const Candidate& x, const Candidate& y) {
    return std::tie(x.a, x.b) < std::tie(y.a, y.b);
  };
  std::sort(candidates.begin(), candidates.end(), by_key);  // independent of hash order
  std::vector<Candidate> popular, mid;
  for (const auto& c : candidates) (c.popular ? popular : mid).push_back(c);
  uint64_t want_popular = (k + 1) / 2;
  want_popular = std::max<uint64_t>(want_popular, k > mid.size() ? k - mid.size() : 0);
  std::vector<Candidate> chosen = take_random(popular, want_popular, rng);
  auto rest = take_random(mid, k - chosen.size(), rng);
  chosen.insert(chosen.end(), rest.begin(), rest.end());
  if (chosen.size() < k) {
    rest = take_random(popular, k - chosen.size(), rng);
    chosen.insert(chosen.end(), rest.begin(), rest.end());
  }
  if (chosen.size() < k) {
    std::sort(fallback.begin(), fallback.end(), [&](const Candidate& x, const Candidate& y) {
      return x.rows != y.rows ? x.rows > y.rows : by_key(x, y);
    });
    uint64_t rarer = 0;
    for (const auto& f : fallback) {
      if (chosen.size() == k) break;
      chosen.push_back(f);
      ++rarer;
    }
    if (rarer > 0)
      spdlog::warn("synth: fewer {} than requested occur in at least {:.3g} of the pilot rows; "
                   "{} planted {} are rarer",
                   what, min_frequency, rarer, what);
  }
  if (chosen.size() < k)
    throw Error(ErrorKind::kConfig,
                fmt::format("synth: only {} {} occur in the pilot rows, {} requested; lower the "
                            "planted count or raise --features / --nnz-per-row",
                            chosen.size(), what, k));
  return chosen;
}

// Chooses the planted terms and weights on the pilot rows; the bias follows
// from the pilot margins (set_bias).
PlantedModel choose_model(ChunkRunner& runner, RowGenerator& g, const SparseSynthOptions& o,
                          uint64_t pilot, MemoryBudget& budget) {
  const uint64_t cap = std::min(o.features, kPilotRankCap);
  const auto min_rows = static_cast<uint32_t>(
      std::max<double>(1.0, std::ceil(o.min_term_frequency * static_cast<double>(pilot))));
  const auto max_rows = static_cast<uint32_t>(std::floor(kMaxTermFrequency * static_cast<double>(pilot)));
  const auto popular_rows = static_cast<uint32_t>(
      std::ceil(kPopularFactor * o.min_term_frequency * static_cast<double>(pilot)));
  BudgetedArray<uint32_t> rank_rows(budget, cap, "synth pilot counts");
  rank_rows.fill(0);
  runner.run(
      pilot, [&](Chunk& c) { generate_chunk(g, kStreamTrain, c, true, false); },
      [&](Chunk& c) {
        for (uint64_t r : c.ranks)
          if (r < cap) ++rank_rows[r];
      });

  // Linear candidates, and the ranks frequent enough to be in a frequent pair.
  std::vector<Candidate> linear, linear_fallback;
  std::vector<uint64_t> frequent;
  for (uint64_t r = 0; r < cap; ++r) {
    uint32_t n = rank_rows[r];
    if (n >= min_rows) frequent.push_back(r);
    if (n >= min_rows && n <= max_rows)
      linear.push_back({r, 0, n, n >= popular_rows});
    else if (n > 0 && n < min_rows)
      linear_fallback.push_back({r, 0, n, false});
  }
  Rng rng(row_seed(o.seed, kStreamModel, 0));
  std::vector<Candidate> lin =
      choose_terms(std::move(linear), std::move(linear_fallback), o.planted_linear, rng,
                   "linear features", o.min_term_frequency);

  // Pair counts among frequent ranks that are not planted linear features.
  std::vector<Candidate> cross;
  if (o.planted_cross > 0) {
    BudgetedArray<int32_t> index(budget, cap, "synth pilot counts");
    index.fill(-1);
    for (size_t i = 0; i < frequent.size(); ++i) index[frequent[i]] = static_cast<int32_t>(i);
    for (const auto& c : lin) index[c.a] = -1;
    const uint64_t f = frequent.size();
    std::unordered_map<uint64_t, uint32_t> pairs;
    std::vector<uint32_t> present;
    runner.run(
        pilot, [&](Chunk& c) { generate_chunk(g, kStreamTrain, c, true, false); },
        [&](Chunk& c) {
          for (uint64_t i = 0; i < c.count; ++i) {
            present.clear();
            for (uint32_t e = c.row_ptr[i]; e < c.row_ptr[i + 1]; ++e)
              if (c.ranks[e] < cap && index[c.ranks[e]] >= 0)
                present.push_back(static_cast<uint32_t>(index[c.ranks[e]]));
            std::sort(present.begin(), present.end());
            for (size_t x = 0; x < present.size(); ++x)
              for (size_t y = x + 1; y < present.size(); ++y) ++pairs[present[x] * f + present[y]];
          }
        });
    std::vector<Candidate> candidates, fallback;
    for (const auto& [key, n] : pairs) {
      uint64_t a = frequent[key / f], b = frequent[key % f];
      bool popular = rank_rows[a] >= popular_rows && rank_rows[b] >= popular_rows;
      if (n >= min_rows && n <= max_rows)
        candidates.push_back({a, b, n, popular});
      else if (n < min_rows)
        fallback.push_back({a, b, n, false});
    }
    cross = choose_terms(std::move(candidates), std::move(fallback), o.planted_cross, rng,
                         "cross pairs", o.min_term_frequency);
  }

  // Weights ±U(0.5, 1.5), drawn in the order the terms were chosen.
  auto weight = [&] {
    double w = 0.5 + rng.uniform();
    return rng.next() & 1 ? -w : w;
  };
  std::vector<std::pair<uint64_t, double>> lin_terms;  // (id, w)
  for (const auto& c : lin) lin_terms.emplace_back(g.feature_of_rank(c.a), weight());
  std::vector<std::tuple<uint64_t, uint64_t, double>> cross_terms;
  for (const auto& c : cross) {
    uint64_t j = g.feature_of_rank(c.a), k = g.feature_of_rank(c.b);
    cross_terms.emplace_back(std::min(j, k), std::max(j, k), weight());
  }
  std::sort(lin_terms.begin(), lin_terms.end());
  std::sort(cross_terms.begin(), cross_terms.end());

  PlantedModel m;
  for (const auto& [id, w] : lin_terms) m.ids.push_back(id);
  for (const auto& [j, k, w] : cross_terms) {
    m.ids.push_back(j);
    m.ids.push_back(k);
  }
  std::sort(m.ids.begin(), m.ids.end());
  m.ids.erase(std::unique(m.ids.begin(), m.ids.end()), m.ids.end());
  auto at = [&](uint64_t id) {
    return static_cast<uint32_t>(std::lower_bound(m.ids.begin(), m.ids.end(), id) - m.ids.begin());
  };
  m.linear.assign(m.ids.size(), -1);
  for (const auto& [id, w] : lin_terms) {
    m.linear[at(id)] = static_cast<int32_t>(m.linear_w.size());
    m.linear_w.push_back(w);
  }
  m.linear_count = m.linear_w.size();
  for (const auto& [j, k, w] : cross_terms) m.cross.push_back({at(j), at(k), w});
  return m;
}

// bias = -t where t lies half-way between two distinct pilot margins, at the
// split closest to 50/50.
double choose_bias(ChunkRunner& runner, const RowGenerator& g, uint64_t pilot) {
  std::vector<double> margins;
  margins.reserve(pilot);
  runner.run(
      pilot,
      [&](Chunk& c) {
        generate_chunk(g, kStreamTrain, c, false, true);
      },
      [&](Chunk& c) { margins.insert(margins.end(), c.margins.begin(), c.margins.end()); });
  std::sort(margins.begin(), margins.end());
  const size_t n = margins.size();
  const double v = margins[n / 2];
  size_t lo = static_cast<size_t>(std::lower_bound(margins.begin(), margins.end(), v) - margins.begin());
  size_t hi = static_cast<size_t>(std::upper_bound(margins.begin(), margins.end(), v) - margins.begin());
  // Threshold below v: n - lo rows positive; above v: n - hi rows positive.
  double below = lo > 0 ? (margins[lo - 1] + v) / 2 : v - 1;
  double above = hi < n ? (v + margins[hi]) / 2 : v + 1;
  auto imbalance = [&](size_t positive) {
    return std::abs(2.0 * static_cast<double>(positive) - static_cast<double>(n));
  };
  double t = imbalance(n - lo) <= imbalance(n - hi) ? below : above;
  return -t;
}

// ------------------------------------------------------------------ store

struct StoreOutcome {
  uint64_t nnz = 0, positive = 0, shards = 0, bytes = 0, passes = 0;
  std::vector<uint64_t> term_rows;
};

StoreOutcome write_store(ChunkRunner& runner, const RowGenerator& g, const SparseSynthOptions& o,
                         const std::string& out_dir, uint64_t shard_target, MemoryBudget& budget) {
  auto started = std::chrono::steady_clock::now();
  auto lap = [last = started]() mutable {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - last).count();
    last = now;
    return s;
  };
  store::check_output_dir(out_dir);
  const uint64_t n = o.rows, m = o.features;
  const bool binary = o.values == SynthValues::kBinary;
  StoreOutcome r;
  r.term_rows.assign(g.model().terms(), 0);

  // Counting pass: column counts, labels, term rows.
  BudgetedArray<uint32_t> counts(budget, m, "synth column counts", "lower --features");
  counts.fill(0);
  BudgetedArray<int8_t> labels(budget, n, "synth labels");
  runner.run(
      n, [&](Chunk& c) { generate_chunk(g, kStreamTrain, c, false, true); },
      [&](Chunk& c) {
        for (uint64_t id : c.ids) ++counts[id];
        std::copy(c.labels.begin(), c.labels.end(), labels.data() + c.first);
        for (int8_t y : c.labels) r.positive += y > 0;
        r.nnz += c.ids.size();
        for (size_t t = 0; t < r.term_rows.size(); ++t) r.term_rows[t] += c.term_rows[t];
      });
  r.passes = 1;
  if (r.positive == 0 || r.positive == n)
    throw Error(ErrorKind::kConfig,
                fmt::format("synth: all {} training rows got the label {} (the planted terms are "
                            "too rare in the first rows); raise --rows or --min-term-frequency",
                            n, r.positive ? "+1" : "-1"));
  spdlog::debug("synth store: counted {} nonzeros in {:.2f}s", r.nnz, lap());

  // The one store writer cuts blocks and shards exactly as ingest does.
  store::TempDir tmp(out_dir);
  store::StoreWriterOptions wo;
  wo.n_rows = n;
  wo.tile_rows = o.tile_rows;
  wo.shard_target_bytes = shard_target;
  wo.block_target_bytes = o.block_bytes ? o.block_bytes : kDefaultBlockBytes;
  wo.io_bytes = 1 * kMiB;
  store::StoreWriter writer(tmp, budget, wo);

  // The column buffer: as much as the budget leaves (minus room for file
  // buffers), at least the largest column.
  const uint64_t entry_bytes = binary ? 4 : 8;
  uint64_t largest = 0;
  for (uint64_t j = 0; j < m; ++j) largest = std::max<uint64_t>(largest, counts[j]);
  const uint64_t slack = 4 * kMiB;
  uint64_t avail = budget.available() > slack ? budget.available() - slack : 0;
  if (o.column_buffer_bytes > 0) avail = std::min(avail, o.column_buffer_bytes);
  uint64_t capacity = std::min<uint64_t>({avail / entry_bytes, r.nnz, uint64_t{UINT32_MAX}});
  capacity = std::max({capacity, largest, uint64_t{1}});
  BudgetedArray<uint32_t> rows(budget, capacity, "synth column buffer", "lower --features");
  BudgetedArray<float> values;
  if (!binary) values = BudgetedArray<float>(budget, capacity, "synth column buffer");

  for (uint64_t c0 = 0; c0 < m;) {
    // A range of consecutive columns whose nonzeros fit the buffer.
    uint64_t c1 = c0, group_nnz = 0;
    while (c1 < m && group_nnz + counts[c1] <= capacity) group_nnz += counts[c1++];
    FGM_ASSERT(c1 > c0);
    // counts -> start offsets inside the group; after the scatter, end offsets.
    uint64_t offset = 0;
    for (uint64_t j = c0; j < c1; ++j) {
      uint64_t k = counts[j];
      counts[j] = static_cast<uint32_t>(offset);
      offset += k;
    }
    if (group_nnz > 0) {
      runner.run(
          n,
          [&](Chunk& c) {
            generate_chunk(g, kStreamTrain, c, false, false);
            c.entries.clear();
            for (uint64_t i = 0; i < c.count; ++i)
              for (uint32_t e = c.row_ptr[i]; e < c.row_ptr[i + 1]; ++e)
                if (c.ids[e] >= c0 && c.ids[e] < c1)
                  c.entries.push_back({c.ids[e], static_cast<uint32_t>(c.first + i),
                                       static_cast<float>(c.values[e])});
          },
          [&](Chunk& c) {
            if (binary) {
              for (const auto& e : c.entries) rows[counts[e.column]++] = e.row;
            } else {
              for (const auto& e : c.entries) {
                uint32_t at = counts[e.column]++;
                rows[at] = e.row;
                values[at] = e.value;
              }
            }
          });
      ++r.passes;
    }
    for (uint64_t j = c0, begin = 0; j < c1; ++j) {
      const uint64_t end = counts[j];
      if (end > begin)
        writer.add_column(j, rows.data() + begin, binary ? nullptr : values.data() + begin,
                          end - begin);
      begin = end;
    }
    spdlog::debug("synth store: columns {}..{} ({} nonzeros) in {:.2f}s", c0, c1 - 1, group_nnz,
                  lap());
    c0 = c1;
  }
  rows = {};
  values = {};
  store::WrittenShards written = writer.finish();
  r.shards = written.shards.size();

  // Manifest: as ingest writes it; the "input" is the generator's settings.
  store::ManifestFields mf;
  mf.n_rows = n;
  mf.n_features = m;
  mf.nnz = r.nnz;
  mf.n_positive = r.positive;
  mf.n_negative = n - r.positive;
  mf.positive_value = 1;
  mf.negative_value = -1;
  mf.index_base = 1;
  mf.declared_features = m;
  mf.input_path = fmt::format(
      "synthetic:sparse rows={} features={} nnz_per_row={} zipf={} cooccur={} group_size={} "
      "planted_linear={} planted_cross={} min_term_frequency={} values={} label_noise={} seed={}",
      n, m, o.nnz_per_row, o.zipf, o.cooccur, o.group_size, o.planted_linear, o.planted_cross,
      o.min_term_frequency, binary ? "binary" : "real", o.label_noise, o.seed);
  mf.input_bytes = 0;
  mf.input_checksum = xxh64(mf.input_path.data(), mf.input_path.size());
  mf.shard_target_bytes = shard_target;
  mf.tile_rows = wo.tile_rows;
  mf.nonempty_columns = written.nonempty_columns;
  mf.block_bytes = wo.block_target_bytes;
  mf.block_count = written.block_count;
  mf.shards = std::move(written.shards);
  mf.labels_checksum = xxh64(labels.data(), n);
  BudgetedArray<uint16_t> classes(budget, n, "synth class indices");
  for (uint64_t i = 0; i < n; ++i) classes[i] = labels[i] > 0 ? 1 : 0;  // class table {-1, +1}
  mf.class_values = {-1, 1};
  mf.class_counts = {n - r.positive, r.positive};
  mf.classes_checksum = xxh64(classes.data(), 2 * n);
  store::write_manifest(
      tmp, mf, budget, 1 * kMiB, [&](store::FileWriter& out) { out.write(labels.data(), n); },
      [&](store::FileWriter& out) { out.write(classes.data(), 2 * n); });
  tmp.commit();
  for (const auto& e : fs::directory_iterator(out_dir))
    if (e.is_regular_file()) r.bytes += e.file_size();
  spdlog::debug("synth store: manifest and commit in {:.2f}s", lap());
  return r;
}

void validate(const SparseSynthOptions& o) {
  auto bad = [](const char* key, const std::string& value, const char* range) {
    throw Error(ErrorKind::kConfig, msg::out_of_range("synth", key, value, range));
  };
  if (o.rows < 1) bad("--rows", std::to_string(o.rows), ">= 1");
  if (o.store && o.rows > std::numeric_limits<uint32_t>::max())
    bad("--rows", std::to_string(o.rows), "< 2^32 for a store");
  if (o.features < 2 || o.features > (uint64_t{1} << 48))
    bad("--features", std::to_string(o.features), "2 .. 2^48");
  if (o.store && o.features > (uint64_t{1} << 36))
    bad("--features", std::to_string(o.features), "<= 2^36 for a store");
  if (!(o.nnz_per_row >= 1) || o.nnz_per_row > 1e6)
    bad("--nnz-per-row", fmt::format("{}", o.nnz_per_row), "1 .. 10^6");
  if (!(o.zipf > 0) || o.zipf > 10) bad("--zipf", fmt::format("{}", o.zipf), "(0, 10]");
  if (!(o.cooccur >= 0 && o.cooccur <= 1)) bad("--cooccur", fmt::format("{}", o.cooccur), "[0, 1]");
  if (o.group_size < 1) bad("--group-size", std::to_string(o.group_size), ">= 1");
  if (!(o.min_term_frequency > 0 && o.min_term_frequency < kMaxTermFrequency))
    bad("--min-term-frequency", fmt::format("{}", o.min_term_frequency), "(0, 0.5)");
  if (!(o.label_noise >= 0 && o.label_noise <= 0.5))
    bad("--label-noise", fmt::format("{}", o.label_noise), "[0, 0.5]");
  if (o.threads < 1) bad("--threads", std::to_string(o.threads), ">= 1");
  if (o.pilot_rows < 1) bad("pilot_rows", std::to_string(o.pilot_rows), ">= 1");
  if (o.planted_linear + o.planted_cross == 0)
    bad("--planted-linear", "0", "> 0 (or --planted-cross > 0)");
}

std::string format_truth(const SparseSynthOptions& o, const PlantedTruth& t,
                         const std::vector<uint64_t>& term_rows) {
  std::string s = fmt::format(
      "# fgm synth --kind sparse --rows {} --test-rows {} --features {} --nnz-per-row {} --zipf {} "
      "--cooccur {} --group-size {} --planted-linear {} --planted-cross {} "
      "--min-term-frequency {} --values {} --label-noise {} --seed {}\n"
      "# label = sign(bias + sum of the terms below), flipped with probability label_noise;\n"
      "# 1-based feature ids; a cross term is x_j * x_k. After '#': training rows with the term.\n",
      o.rows, o.test_rows, o.features, o.nnz_per_row, o.zipf, o.cooccur, o.group_size,
      o.planted_linear, o.planted_cross, o.min_term_frequency,
      o.values == SynthValues::kBinary ? "binary" : "real", o.label_noise, o.seed);
  s += fmt::format("bias {:.17g}\n", t.bias);
  for (size_t i = 0; i < t.ids.size(); ++i)
    s += fmt::format("linear {} {:.17g}  # {}\n", t.ids[i] + 1, t.weights[i], term_rows[i]);
  for (size_t i = 0; i < t.cross_ids.size(); ++i)
    s += fmt::format("cross {} {} {:.17g}  # {}\n", t.cross_ids[i].first + 1,
                     t.cross_ids[i].second + 1, t.cross_weights[i], term_rows[t.ids.size() + i]);
  return s;
}

}  // namespace

SparseSynthResult write_sparse_synthetic(const std::string& dir, const SparseSynthOptions& o,
                                         MemoryBudget& budget) {
  auto started = std::chrono::steady_clock::now();
  validate(o);
  fs::create_directories(dir);
  const fs::path base(dir);
  const std::string ext = o.gzip ? ".svm.gz" : ".svm";
  // Before anything is generated: the store target must be replaceable.
  if (o.store) store::check_output_dir((base / "store").string());
  const uint64_t shard_target =
      o.shard_target_bytes ? o.shard_target_bytes
                           : std::max<uint64_t>(std::min(64 * kMiB, budget.available() / 8), 4 * kKiB);

  RowGenerator g(o);
  ChunkRunner runner(o.threads, budget, o.nnz_per_row);
  const uint64_t pilot = std::min(o.rows, o.pilot_rows);
  PlantedModel model = choose_model(runner, g, o, pilot, budget);
  g.set_model(model);
  model.bias = choose_bias(runner, g, pilot);
  g.set_model(model);

  SparseSynthResult res;
  PlantedTruth& t = res.truth;
  for (size_t q = 0; q < model.ids.size(); ++q)
    if (model.linear[q] >= 0) {
      t.ids.push_back(model.ids[q]);
      t.weights.push_back(model.linear_w[static_cast<size_t>(model.linear[q])]);
    }
  for (const auto& x : model.cross) {
    t.cross_ids.emplace_back(model.ids[x.a], model.ids[x.b]);
    t.cross_weights.push_back(x.w);
  }
  t.bias = model.bias;
  spdlog::debug("synth: pilot of {} rows chose {} linear and {} cross terms, bias {:.4g}", pilot,
                t.ids.size(), t.cross_ids.size(), t.bias);

  if (o.store) {
    res.train_path = (base / "store").string();
    StoreOutcome s = write_store(runner, g, o, res.train_path, shard_target, budget);
    res.train_nnz = s.nnz;
    res.train_positive = s.positive;
    res.shards = s.shards;
    res.output_bytes = s.bytes;
    res.generation_passes = s.passes;
    res.term_rows = std::move(s.term_rows);
  } else {
    res.train_path = (base / ("train" + ext)).string();
    TextSplit s = write_text_split(runner, g, kStreamTrain, o.rows, res.train_path, o.gzip);
    res.train_nnz = s.nnz;
    res.train_positive = s.positive;
    res.output_bytes = s.bytes;
    res.generation_passes = 1;
    res.term_rows = std::move(s.term_rows);
  }
  if (o.test_rows > 0) {
    res.test_path = (base / ("test" + ext)).string();
    TextSplit s = write_text_split(runner, g, kStreamTest, o.test_rows, res.test_path, o.gzip);
    res.test_nnz = s.nnz;
    res.test_positive = s.positive;
  }
  res.truth_path = (base / "truth.txt").string();
  write_file_atomic(res.truth_path, format_truth(o, t, res.term_rows));
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return res;
}

}  // namespace fgm
