// StoreWriter: columns in id order -> stored column blocks (tile-major) ->
// shard files with piece checksums; and the manifest.
#include "io/store_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/hash.h"
#include "core/messages.h"
#include "io/libsvm_reader.h"
#include "io/schema/manifest_generated.h"
#include "io/schema/shard_generated.h"
#include "io/shard_store.h"

namespace fgm::store {
namespace {

// Preamble (magic, version, FlatBuffer length and XXH64) followed by the buffer.
std::vector<uint8_t> framed(const char (&magic)[8], const flatbuffers::FlatBufferBuilder& fbb) {
  Preamble pre{};
  std::memcpy(pre.magic, magic, 8);
  pre.format_version = kStoreFormatVersion;
  pre.flatbuffer_bytes = fbb.GetSize();
  pre.flatbuffer_checksum = xxh64(fbb.GetBufferPointer(), fbb.GetSize());
  std::vector<uint8_t> bytes(sizeof(pre) + fbb.GetSize());
  std::memcpy(bytes.data(), &pre, sizeof(pre));
  std::memcpy(bytes.data() + sizeof(pre), fbb.GetBufferPointer(), fbb.GetSize());
  return bytes;
}

// Streams `bytes` of `path` from `offset` into h (an Xxh64 or a PieceHasher).
template <class Hasher>
void hash_file_range(const std::string& path, uint64_t offset, uint64_t bytes,
                     MemoryBudget& budget, uint64_t buffer_bytes, Hasher& h) {
  FileReader in(path, budget, buffer_bytes, "store writer");
  in.seek(offset);
  while (bytes > 0) {
    if (in.refill(std::min<uint64_t>(bytes, 1 << 20)) == 0)
      throw Error(ErrorKind::kIo, msg::read_failed(path, "file ends early"));
    uint64_t n = std::min(bytes, in.available());
    h.update(in.data(), n);
    in.consume(n);
    bytes -= n;
  }
}

// Column range including implicit zeros: a column with fewer nonzeros than
// rows also takes the value 0.
std::pair<float, float> range_with_zeros(float lo, float hi, uint64_t nnz, uint64_t n_rows) {
  if (nnz == 0) return {0.0f, 0.0f};
  if (nnz < n_rows) return {std::min(lo, 0.0f), std::max(hi, 0.0f)};
  return {lo, hi};
}

struct Pair {
  uint32_t row;
  float value;
};
// Per staged column (grows down from the end of the arena).
struct Meta {
  uint64_t id;
  uint64_t end;  // shard-local nnz offset after this column
  float min, max;
  uint32_t cells;  // tiles holding its rows
  uint32_t unit;   // 1: every stored value is 1.0
};
static_assert(sizeof(Pair) == 8 && sizeof(Meta) == 32);

// One cell of a block being laid out: `count` nonzeros of block column
// `column`, starting at pair `source` of the staged shard (its tile is where
// it sits in the tile-major order).
struct Cell {
  uint32_t column, count;
  uint64_t source;
};
static_assert(sizeof(Cell) == 16);

// Counts the tiles a sequence of increasing rows touches, span by span.
struct TileCounter {
  uint64_t tile_rows;
  uint64_t cells = 0;
  uint64_t last_tile = std::numeric_limits<uint64_t>::max();
  void add(uint32_t row) {
    uint64_t t = row / tile_rows;
    if (t != last_tile) {
      ++cells;
      last_tile = t;
    }
  }
};

}  // namespace

// ---------------------------------------------------------------- StoreWriter

// The shard buffer (uint64 words), and the cell layout of one block: a cell
// costs at least 16 of the block target's bytes, and a column bigger than the
// target (a block of its own) has at most one cell per tile.
uint64_t shard_buffer_words(const StoreWriterOptions& o) { return std::max<uint64_t>(o.shard_target_bytes / 8, 8); }
uint64_t layout_cells(const StoreWriterOptions& o) {
  return std::max(std::min(o.block_target_bytes, shard_buffer_words(o) * 8) / 16, tile_count_of(o.n_rows, o.tile_rows));
}
// Cells, then the column list of one block part (at most one column per cell).
uint64_t layout_bytes(const StoreWriterOptions& o) {
  return (sizeof(Cell) + 8) * layout_cells(o) + 16 * (tile_count_of(o.n_rows, o.tile_rows) + 1);
}

// Columns of fewer nonzeros go to a block's tail part (format 6): by default
// those of fewer than 16 a tile on average, the columns the pruned pass does
// not sum in batches (features/linear_space.cpp, deferred_batches).
uint64_t tail_threshold(const StoreWriterOptions& o) {
  if (o.tail_below_nnz > 0) return o.tail_below_nnz;
  return std::max<uint64_t>(16 * tile_count_of(o.n_rows, o.tile_rows), 16);
}

class StoreWriter::Impl {
 public:
  Impl(const TempDir& dir, MemoryBudget& budget, const StoreWriterOptions& o)
      : dir_(dir),
        budget_(budget),
        o_(o),
        tiles_(tile_count_of(o.n_rows, o.tile_rows)),
        arena_(budget, shard_buffer_words(o), "store writer shard buffer",
               "lower store.shard_target_bytes or raise engine.memory_budget"),
        capacity_(arena_.size() * 8),
        raw_offset_(shard_raw_offset()),
        tail_below_(tail_threshold(o)) {
    FGM_ASSERT(o.tile_rows > 0);
    FGM_ASSERT(o.n_rows <= std::numeric_limits<uint32_t>::max());
    const uint64_t cells = layout_cells(o);  // reserved up front (see layout_cells)
    cells_memory_ = budget.reserve(layout_bytes(o),
                                   "store writer block layout",
                                   "lower store.block_bytes or raise engine.memory_budget");
    // Capacity only: the pages are touched as blocks need them (a zero-filled
    // 16 MiB layout cost small ingests a tenth of a second of page faults).
    sorted_.reserve(cells);
    part_columns_.reserve(cells);
    reserved_cells_ = cells;
    tile_starts_.resize(tiles_ + 1);
    fill_.resize(tiles_ + 1);
  }

  void add_column(uint64_t id, uint64_t nnz, const ColumnFill& fill) {
    FGM_ASSERT(nnz > 0 && (!any_column_ || id > last_id_));
    FGM_ASSERT(nnz <= o_.n_rows);
    any_column_ = true;
    last_id_ = id;
    const uint64_t need = sizeof(Meta) + sizeof(Pair) * nnz;
    if (count_ > 0 && used() + need > capacity_) flush();
    if (need > capacity_) {
      write_single_column_shard(id, nnz, fill);
      return;
    }
    ArenaSink sink(pairs() + nnz_, o_.tile_rows);
    fill(sink);
    FGM_ASSERT(sink.rows_seen == nnz && sink.values_seen == nnz);
    nnz_ += nnz;
    auto [lo, hi] = range_with_zeros(sink.min, sink.max, nnz, o_.n_rows);
    Meta& m = meta(count_);
    m = Meta{id, nnz_, lo, hi, static_cast<uint32_t>(sink.tiles.cells),
             sink.min == 1.0f && sink.max == 1.0f ? 1u : 0u};
    // Block cut: a block holds columns while its arrays stay within the target.
    const uint64_t cost = 16 + 8 * nnz + 8 * sink.tiles.cells;
    if (count_ == 0 || (block_cost_ > 0 && block_cost_ + cost > o_.block_target_bytes)) {
      block_begin_.push_back(count_);
      block_cost_ = 0;
    }
    block_cost_ += cost;
    ++count_;
  }

  WrittenShards finish() {
    if (count_ > 0) flush();
    arena_ = {};
    sorted_ = {};
    part_columns_ = {};
    tile_starts_ = {};
    fill_ = {};
    cells_memory_.release();
    for (const auto& s : out_.shards) fsync_file(dir_.file(s.file_name));
    return std::move(out_);
  }

 private:
  Pair* pairs() { return reinterpret_cast<Pair*>(arena_.data()); }
  Meta& meta(uint64_t j) {
    return reinterpret_cast<Meta*>(reinterpret_cast<uint8_t*>(arena_.data()) +
                                   capacity_)[-1 - static_cast<int64_t>(j)];
  }
  uint64_t used() const { return sizeof(Pair) * nnz_ + sizeof(Meta) * count_; }
  uint64_t begin_of(uint64_t j) { return j == 0 ? 0 : meta(j - 1).end; }

  struct ArenaSink final : ColumnSink {
    ArenaSink(Pair* out, uint64_t tile_rows) : out(out), tiles{tile_rows} {}
    void rows(const uint8_t* data, uint64_t n) override {
      for (uint64_t i = 0; i < n; ++i) {
        uint32_t r;
        std::memcpy(&r, data + 4 * i, 4);
        out[rows_seen + i].row = r;
        tiles.add(r);
      }
      rows_seen += n;
    }
    void values(const uint8_t* data, uint64_t n) override {
      for (uint64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, data + 4 * i, 4);
        out[values_seen + i].value = v;
        min = std::min(min, v);
        max = std::max(max, v);
      }
      values_seen += n;
    }
    Pair* out;
    TileCounter tiles;
    uint64_t rows_seen = 0, values_seen = 0;
    float min = std::numeric_limits<float>::infinity();
    float max = -std::numeric_limits<float>::infinity();
  };

  // A staged block, or one part of it (format 6, store_format.h): the staged
  // columns of [begin, end) whose part() is `part`, in the id range
  // [first_id, end_id).
  enum class Part { kWhole, kHead, kTail };
  struct StagedBlock {
    uint64_t begin = 0, end = 0;
    Part part = Part::kWhole;
    uint64_t first_id = 0, end_id = 0, column_count = 0, nnz = 0, cells = 0;
    bool unit = true;   // every value 1.0: no values array (kBlockUnitValues)
    bool tail = false;  // the tail part of the block before it (kBlockTailPart)
    double tail_bound = 0;  // max over the columns of nonzeros · max |value|
    BlockLayout layout;
  };

  uint64_t nnz_of(uint64_t j) { return meta(j).end - begin_of(j); }
  bool in_part(const StagedBlock& b, uint64_t j) {
    return b.part == Part::kWhole || (nnz_of(j) < tail_below_) == (b.part == Part::kTail);
  }
  // The staged columns of `b`, in order, into part_columns_ (reserved with
  // the cell layout: a block has at most as many columns as cells).
  const std::vector<uint64_t>& part_columns(const StagedBlock& b) {
    part_columns_.clear();
    for (uint64_t j = b.begin; j < b.end; ++j)
      if (in_part(b, j)) part_columns_.push_back(j);
    FGM_ASSERT(part_columns_.size() == b.column_count);
    return part_columns_;
  }

  // Each block's columns [begin, end), split into a head and a tail part
  // when the tail threshold separates them.
  std::vector<StagedBlock> staged_blocks() {
    std::vector<StagedBlock> blocks;
    auto add_part = [&](StagedBlock s) {
      for (uint64_t j = s.begin; j < s.end; ++j) {
        if (!in_part(s, j)) continue;
        s.column_count += 1;
        s.nnz += nnz_of(j);
        s.cells += meta(j).cells;
        s.unit = s.unit && meta(j).unit == 1;
        const double x_max = std::max(std::fabs(static_cast<double>(meta(j).min)),
                                      std::fabs(static_cast<double>(meta(j).max)));
        s.tail_bound = std::max(s.tail_bound, static_cast<double>(nnz_of(j)) * x_max);
      }
      FGM_ASSERT(s.nnz <= std::numeric_limits<uint32_t>::max());
      s.layout = block_layout(s.column_count, s.cells, s.nnz, tiles_, s.unit);
      blocks.push_back(s);
    };
    for (size_t b = 0; b < block_begin_.size(); ++b) {
      StagedBlock s;
      s.begin = block_begin_[b];
      s.end = b + 1 < block_begin_.size() ? block_begin_[b + 1] : count_;
      s.first_id = meta(s.begin).id;
      s.end_id = meta(s.end - 1).id + 1;
      uint64_t short_columns = 0;
      for (uint64_t j = s.begin; j < s.end; ++j) short_columns += nnz_of(j) < tail_below_;
      if (short_columns == 0 || short_columns == s.end - s.begin) {
        add_part(s);
        continue;
      }
      s.part = Part::kHead;
      add_part(s);
      s.part = Part::kTail;
      s.tail = true;
      add_part(s);
    }
    return blocks;
  }

  // The block's cells in tile-major order (columns increase inside a tile)
  // into sorted_: count the cells of each tile, then place them.
  void lay_out_cells(const StagedBlock& b) {
    auto for_each_cell = [&](auto&& fn) {
      const std::vector<uint64_t>& columns = part_columns(b);
      for (uint64_t k = 0; k < columns.size(); ++k) {
        const uint64_t j = columns[k];
        const uint64_t begin = begin_of(j), end = meta(j).end;
        for (uint64_t p = begin; p < end;) {
          const uint32_t tile = pairs()[p].row / o_.tile_rows;
          FGM_ASSERT(tile < tiles_);
          const uint64_t tile_end = uint64_t{tile + 1} * o_.tile_rows;
          uint64_t q = p + 1;
          while (q < end && pairs()[q].row < tile_end) ++q;
          fn(tile, Cell{static_cast<uint32_t>(k), static_cast<uint32_t>(q - p), p});
          p = q;
        }
      }
    };
    std::fill(tile_starts_.begin(), tile_starts_.end(), 0);
    for_each_cell([&](uint32_t tile, const Cell&) { ++tile_starts_[tile + 1]; });
    for (uint64_t t = 0; t < tiles_; ++t) tile_starts_[t + 1] += tile_starts_[t];
    FGM_ASSERT(tile_starts_[tiles_] == b.cells);
    if (b.cells > sorted_.size()) {
      if (b.cells > reserved_cells_) {
        cells_memory_.resize((sizeof(Cell) + 8) * b.cells + 16 * (tiles_ + 1));
        reserved_cells_ = b.cells;
        part_columns_.reserve(b.cells);
      }
      sorted_.resize(b.cells);
    }
    std::copy(tile_starts_.begin(), tile_starts_.end() - 1, fill_.begin());
    for_each_cell([&](uint32_t tile, const Cell& c) { sorted_[fill_[tile]++] = c; });
  }

  // Streams the staged block `b` (its layout) into out(data, bytes).
  template <class Out>
  void emit_block(const StagedBlock& b, Out&& out) {
    lay_out_cells(b);
    static const uint8_t kZeros[kAlign] = {};
    uint64_t at = 0;
    auto pad_to = [&](uint64_t offset) {
      FGM_ASSERT(offset >= at && offset - at <= kAlign);
      out(kZeros, offset - at);
      at = offset;
    };
    auto emit = [&](uint64_t n, auto get) {
      using T = decltype(get(uint64_t{0}));
      constexpr uint64_t kBatch = sizeof(scratch_) / sizeof(T);
      for (uint64_t i = 0; i < n; i += kBatch) {
        uint64_t m = std::min(kBatch, n - i);
        T* s = reinterpret_cast<T*>(scratch_);
        for (uint64_t k = 0; k < m; ++k) s[k] = get(i + k);
        out(scratch_, m * sizeof(T));
      }
      at += n * sizeof(T);
    };
    // Rows and values in cell order: walk the cells, one nonzero at a time.
    auto emit_nonzeros = [&](auto field) {
      size_t cell = 0;
      uint64_t in_cell = 0;
      emit(b.nnz, [&](uint64_t) {
        while (in_cell == sorted_[cell].count) {
          ++cell;
          in_cell = 0;
        }
        return field(pairs()[sorted_[cell].source + in_cell++]);
      });
    };
    const BlockLayout& l = b.layout;
    emit_nonzeros([](const Pair& p) -> uint32_t { return p.row; });
    pad_to(l.values);
    if (!b.unit) emit_nonzeros([](const Pair& p) -> float { return p.value; });
    pad_to(l.column_ids);
    const std::vector<uint64_t>& columns = part_columns(b);
    emit(columns.size(), [&](uint64_t k) -> uint64_t { return meta(columns[k]).id; });
    pad_to(l.col_min);
    emit(columns.size(), [&](uint64_t k) -> float { return meta(columns[k]).min; });
    pad_to(l.col_max);
    emit(columns.size(), [&](uint64_t k) -> float { return meta(columns[k]).max; });
    pad_to(l.tile_cells);
    emit(tiles_ + 1, [&](uint64_t t) -> uint32_t { return static_cast<uint32_t>(tile_starts_[t]); });
    pad_to(l.cell_column);
    emit(b.cells, [&](uint64_t c) -> uint32_t { return sorted_[c].column; });
    pad_to(l.cell_ptr);
    uint64_t ptr = 0;
    emit(b.cells + 1, [&](uint64_t c) -> uint32_t {
      uint64_t v = ptr;
      if (c < b.cells) ptr += sorted_[c].count;
      return static_cast<uint32_t>(v);
    });
    FGM_ASSERT(at == l.end);
    pad_to(l.bytes);
  }

  BlockEntry entry_of(const StagedBlock& b, uint64_t offset) {
    BlockEntry e{};
    e.first_column = b.first_id;
    e.end_column = b.end_id;
    e.column_count = b.column_count;
    e.nnz = b.nnz;
    e.offset = offset;
    e.bytes = b.layout.bytes;
    e.cell_count = static_cast<uint32_t>(b.cells);
    e.tile_count = static_cast<uint32_t>(tiles_);
    e.flags = b.unit ? kBlockUnitValues : 0;
    if (b.tail) e.flags |= kBlockTailPart | uint64_t{tail_bound_bits(b.tail_bound)} << 32;
    return e;
  }

  // Streams the staged shard's raw data region into out(data, bytes).
  template <class Out>
  void emit_raw(const std::vector<StagedBlock>& blocks, const ShardLayout& l, Out&& out) {
    uint64_t at = 0;
    std::vector<BlockEntry> table;
    for (const StagedBlock& b : blocks) {
      table.push_back(entry_of(b, at));
      emit_block(b, out);
      at += b.layout.bytes;
    }
    FGM_ASSERT(at == l.block_table);
    out(table.data(), sizeof(BlockEntry) * table.size());
  }

  ShardHeaderFields header_fields(uint64_t first, uint64_t end, uint64_t count, uint64_t nnz,
                                  uint64_t blocks) const {
    ShardHeaderFields h;
    h.index = static_cast<uint32_t>(out_.shards.size());
    h.first_column = first;
    h.end_column = end;
    h.column_count = count;
    h.nnz = nnz;
    h.n_rows = o_.n_rows;
    h.tile_rows = o_.tile_rows;
    h.block_count = blocks;
    h.raw_offset = raw_offset_;
    return h;
  }

  void flush() {
    const std::vector<StagedBlock> blocks = staged_blocks();
    uint64_t blocks_bytes = 0;
    for (const auto& b : blocks) blocks_bytes += b.layout.bytes;
    const ShardLayout layout = shard_layout(blocks_bytes, blocks.size());
    PieceHasher pieces;
    emit_raw(blocks, layout, [&](const void* p, uint64_t n) { pieces.update(p, n); });
    std::vector<uint64_t> table = pieces.finish();
    FGM_ASSERT(table.size() == layout.piece_count);
    ShardHeaderFields h =
        header_fields(meta(0).id, meta(count_ - 1).id + 1, count_, nnz_, blocks.size());
    h.piece_table_checksum = xxh64(table.data(), 8 * table.size());
    auto header = shard_header_bytes(h, layout);
    FGM_ASSERT(align_up(header.size()) == raw_offset_);
    std::string name = shard_file_name(h.index);
    FileWriter out(dir_.file(name), budget_, o_.io_bytes, "store writer shard file");
    Xxh64 file_hash;
    out.hash_into(&file_hash);
    out.write(header.data(), header.size());
    out.pad_to(raw_offset_);
    emit_raw(blocks, layout, [&](const void* p, uint64_t n) { out.write(p, n); });
    out.pad_to(raw_offset_ + layout.piece_table);
    out.write(table.data(), 8 * table.size());
    uint64_t bytes = out.position();
    out.start_writeback();  // fsynced together at the end, overlapping the next shard
    out.close(false);
    record_shard(name, h, bytes, file_hash.digest());
    count_ = 0;
    nnz_ = 0;
    block_begin_.clear();
    block_cost_ = 0;
  }

  void record_shard(const std::string& name, const ShardHeaderFields& h, uint64_t bytes,
                    uint64_t checksum) {
    out_.shards.push_back(
        {name, h.first_column, h.end_column, h.column_count, h.nnz, h.block_count, bytes, checksum});
    out_.nonempty_columns += h.column_count;
    out_.nnz += h.nnz;
    out_.block_count += h.block_count;
  }

  // Writes rows and values straight into their regions of the shard file,
  // noting the tile boundaries of the rows.
  struct RegionSink final : ColumnSink {
    RegionSink(FileWriter& file, MemoryBudget& budget, uint64_t buffer_bytes, uint64_t rows_at,
               uint64_t values_at, uint64_t tile_rows)
        : file(file),
          rows_buffer(budget, buffer_bytes, "store writer column buffer"),
          values_buffer(budget, buffer_bytes, "store writer column buffer"),
          rows_at(rows_at),
          values_at(values_at),
          tile_rows(tile_rows) {}
    void rows(const uint8_t* data, uint64_t n) override {
      for (uint64_t i = 0; i < n; ++i) {
        uint32_t r;
        std::memcpy(&r, data + 4 * i, 4);
        const uint32_t tile = static_cast<uint32_t>(r / tile_rows);
        if (cells.empty() || cells.back().first != tile) cells.push_back({tile, 0});
        ++cells.back().second;
      }
      append(rows_buffer, rows_fill, rows_at, data, 4 * n);
      rows_seen += n;
    }
    // While every value so far is 1.0 nothing is written: a unit-valued
    // column has no values array. The first other value writes the ones
    // held back, then the values follow as they come.
    void values(const uint8_t* data, uint64_t n) override {
      bool ones = true;
      for (uint64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, data + 4 * i, 4);
        min = std::min(min, v);
        max = std::max(max, v);
        ones = ones && v == 1.0f;
      }
      values_seen += n;
      if (unit && ones) return;
      if (unit) {
        unit = false;
        float batch[1024];
        std::fill(batch, batch + 1024, 1.0f);
        for (uint64_t i = 0; i < values_seen - n; i += 1024)
          append(values_buffer, values_fill, values_at, reinterpret_cast<const uint8_t*>(batch),
                 4 * std::min<uint64_t>(1024, values_seen - n - i));
      }
      append(values_buffer, values_fill, values_at, data, 4 * n);
    }
    void append(BudgetedArray<uint8_t>& buffer, uint64_t& fill, uint64_t& at, const uint8_t* data,
                uint64_t bytes) {
      while (bytes > 0) {
        uint64_t k = std::min(bytes, buffer.size() - fill);
        std::memcpy(buffer.data() + fill, data, k);
        fill += k;
        data += k;
        bytes -= k;
        if (fill == buffer.size()) drain(buffer, fill, at);
      }
    }
    void drain(BudgetedArray<uint8_t>& buffer, uint64_t& fill, uint64_t& at) {
      file.write_at(at, buffer.data(), fill);
      at += fill;
      fill = 0;
    }
    void flush() {
      drain(rows_buffer, rows_fill, rows_at);
      drain(values_buffer, values_fill, values_at);
    }
    FileWriter& file;
    BudgetedArray<uint8_t> rows_buffer, values_buffer;
    uint64_t rows_at, values_at, rows_fill = 0, values_fill = 0;
    uint64_t tile_rows;
    std::vector<std::pair<uint32_t, uint64_t>> cells;  // (tile, nonzeros): at most T
    uint64_t rows_seen = 0, values_seen = 0;
    bool unit = true;  // every value so far is 1.0 (none written yet)
    float min = std::numeric_limits<float>::infinity();
    float max = -std::numeric_limits<float>::infinity();
  };

  // A column bigger than the shard buffer: one shard with one block, its
  // rows and values streamed to disk; the small arrays, the block table and
  // the checksums follow once the rows have been seen.
  void write_single_column_shard(uint64_t id, uint64_t nnz, const ColumnFill& fill) {
    const ShardHeaderFields base = header_fields(id, id + 1, 1, nnz, 1);
    std::string name = shard_file_name(base.index);
    std::string path = dir_.file(name);
    const uint64_t raw = raw_offset_;
    uint64_t total = 0;
    ShardHeaderFields h = base;
    {
      FileWriter out(path, budget_, 4096, "store writer shard file");
      std::vector<std::pair<uint32_t, uint64_t>> cells;
      float lo = 0, hi = 0;
      bool unit = false;
      {
        RegionSink sink(out, budget_, o_.io_bytes, raw, raw + align_up(4 * nnz), o_.tile_rows);
        fill(sink);
        sink.flush();
        FGM_ASSERT(sink.rows_seen == nnz && sink.values_seen == nnz);
        std::tie(lo, hi) = range_with_zeros(sink.min, sink.max, nnz, o_.n_rows);
        cells = std::move(sink.cells);
        unit = sink.unit;
      }
      const BlockLayout bl = block_layout(1, cells.size(), nnz, tiles_, unit);
      FGM_ASSERT(bl.values == align_up(4 * nnz));
      const ShardLayout layout = shard_layout(bl.bytes, 1);
      total = raw + layout.raw_bytes;
      out.write_at(raw + bl.column_ids, &id, 8);
      out.write_at(raw + bl.col_min, &lo, 4);
      out.write_at(raw + bl.col_max, &hi, 4);
      std::vector<uint32_t> tile_cells(tiles_ + 1, 0), cell_ptr(cells.size() + 1, 0);
      for (size_t c = 0; c < cells.size(); ++c) {
        ++tile_cells[cells[c].first + 1];
        cell_ptr[c + 1] = static_cast<uint32_t>(cell_ptr[c] + cells[c].second);
      }
      for (uint64_t t = 0; t < tiles_; ++t) tile_cells[t + 1] += tile_cells[t];
      const std::vector<uint32_t> cell_column(cells.size(), 0);
      out.write_at(raw + bl.tile_cells, tile_cells.data(), 4 * tile_cells.size());
      out.write_at(raw + bl.cell_column, cell_column.data(), 4 * cell_column.size());
      out.write_at(raw + bl.cell_ptr, cell_ptr.data(), 4 * cell_ptr.size());
      BlockEntry e{};
      e.first_column = id;
      e.end_column = id + 1;
      e.column_count = 1;
      e.nnz = nnz;
      e.offset = 0;
      e.bytes = bl.bytes;
      e.cell_count = static_cast<uint32_t>(cells.size());
      e.tile_count = static_cast<uint32_t>(tiles_);
      e.flags = unit ? kBlockUnitValues : 0;
      out.write_at(raw + layout.block_table, &e, sizeof(e));
      // Sized now: the gaps between the arrays read back as zeros.
      if (::ftruncate(out.fd(), static_cast<off_t>(total)) != 0)
        throw Error(ErrorKind::kIo, msg::cannot_write(path, errno_text(errno)));
      PieceHasher pieces;
      hash_file_range(path, raw, layout.data_bytes, budget_, o_.io_bytes, pieces);
      std::vector<uint64_t> table = pieces.finish();
      FGM_ASSERT(table.size() == layout.piece_count);
      out.write_at(raw + layout.piece_table, table.data(), 8 * table.size());
      h.piece_table_checksum = xxh64(table.data(), 8 * table.size());
      auto header = shard_header_bytes(h, layout);
      FGM_ASSERT(align_up(header.size()) == raw);
      out.write_at(0, header.data(), header.size());
      out.start_writeback();
      out.close(false);
    }
    Xxh64 file_hash;
    hash_file_range(path, 0, total, budget_, o_.io_bytes, file_hash);
    record_shard(name, h, total, file_hash.digest());
  }

  const TempDir& dir_;
  MemoryBudget& budget_;
  StoreWriterOptions o_;
  uint64_t tiles_;
  BudgetedArray<uint64_t> arena_;
  uint64_t capacity_;
  Reservation cells_memory_;
  std::vector<Cell> sorted_;
  uint64_t reserved_cells_ = 0;  // what cells_memory_ covers
  std::vector<uint64_t> tile_starts_, fill_;
  uint64_t raw_offset_;
  uint64_t tail_below_;
  std::vector<uint64_t> part_columns_;  // reserved in cells_memory_ (layout_bytes)
  uint64_t count_ = 0, nnz_ = 0;
  std::vector<uint64_t> block_begin_;  // staged column index where each block starts
  uint64_t block_cost_ = 0;
  bool any_column_ = false;
  uint64_t last_id_ = 0;
  alignas(64) uint8_t scratch_[16 << 10];
  WrittenShards out_;
};

StoreWriter::StoreWriter(const TempDir& dir, MemoryBudget& budget, const StoreWriterOptions& options)
    : impl_(std::make_unique<Impl>(dir, budget, options)) {}
StoreWriter::~StoreWriter() = default;

uint64_t StoreWriter::peak_bytes(const StoreWriterOptions& options) {
  return shard_buffer_words(options) * 8 + layout_bytes(options) + options.io_bytes;
}

void StoreWriter::add_column(uint64_t id, uint64_t nnz, const ColumnFill& fill) {
  impl_->add_column(id, nnz, fill);
}

void StoreWriter::add_column(uint64_t id, const uint32_t* rows, const float* values, uint64_t nnz) {
  impl_->add_column(id, nnz, [&](ColumnSink& sink) {
    sink.rows(reinterpret_cast<const uint8_t*>(rows), nnz);
    if (values) {
      sink.values(reinterpret_cast<const uint8_t*>(values), nnz);
      return;
    }
    constexpr uint64_t kBatch = 1024;
    float ones[kBatch];
    std::fill(ones, ones + kBatch, 1.0f);
    for (uint64_t i = 0; i < nnz; i += kBatch)
      sink.values(reinterpret_cast<const uint8_t*>(ones), std::min(kBatch, nnz - i));
  });
}

WrittenShards StoreWriter::finish() { return impl_->finish(); }

// ---------------------------------------------------------------- headers

std::vector<uint8_t> shard_header_bytes(const ShardHeaderFields& h, const ShardLayout& layout) {
  flatbuffers::FlatBufferBuilder fbb(512);
  fbb.ForceDefaults(true);
  auto header = schema::CreateShardHeader(
      fbb, kStoreFormatVersion, h.index, h.first_column, h.end_column, h.column_count, h.nnz,
      h.n_rows, h.tile_rows, h.block_count, h.raw_offset, layout.raw_bytes, layout.block_table,
      layout.piece_bytes, layout.piece_count, layout.piece_table, h.piece_table_checksum);
  schema::FinishSizePrefixedShardHeaderBuffer(fbb, header);
  return framed(kShardMagic, fbb);
}

uint64_t shard_raw_offset() {
  return align_up(shard_header_bytes(ShardHeaderFields{}, shard_layout(0, 0)).size());
}

std::vector<uint16_t> class_indices_of_signs(const int8_t* labels, uint64_t n) {
  std::vector<uint16_t> classes(n);
  for (uint64_t i = 0; i < n; ++i) classes[i] = labels[i] > 0 ? 1 : 0;
  return classes;
}

std::vector<uint8_t> manifest_bytes(const ManifestFields& m) {
  flatbuffers::FlatBufferBuilder fbb(1024 + 128 * m.shards.size());
  fbb.ForceDefaults(true);
  std::vector<flatbuffers::Offset<schema::ShardEntry>> entries;
  entries.reserve(m.shards.size());
  for (const auto& s : m.shards)
    entries.push_back(schema::CreateShardEntry(fbb, fbb.CreateString(s.file_name), s.first_column,
                                               s.column_count, s.nnz, s.file_bytes, s.checksum,
                                               s.end_column, s.block_count));
  auto shards = fbb.CreateVector(entries);
  auto engine_version = fbb.CreateString(FGM_VERSION);
  auto positive_text = fbb.CreateString(label_text(m.positive_value));
  auto negative_text = fbb.CreateString(label_text(m.negative_value));
  auto input_path = fbb.CreateString(m.input_path);
  FGM_ASSERT(m.class_values.size() == m.class_counts.size());
  auto class_values = fbb.CreateVector(m.class_values);
  std::vector<flatbuffers::Offset<flatbuffers::String>> texts;
  for (double v : m.class_values) texts.push_back(fbb.CreateString(label_text(v)));
  auto class_texts = fbb.CreateVector(texts);
  auto class_counts = fbb.CreateVector(m.class_counts);
  auto root = schema::CreateManifest(
      fbb, kStoreFormatVersion, engine_version, m.n_rows, m.n_features, m.nnz, m.n_positive,
      m.n_negative, m.positive_value, m.negative_value, positive_text, negative_text, m.index_base,
      m.declared_features, input_path, m.input_bytes, m.input_checksum, m.explicit_zeros,
      m.shard_target_bytes, shards, m.labels_offset, m.n_rows, m.labels_checksum, class_values,
      class_texts, class_counts, classes_offset(m), 2 * m.n_rows, m.classes_checksum, m.tile_rows,
      m.nonempty_columns, m.block_bytes, m.block_count);
  schema::FinishSizePrefixedManifestBuffer(fbb, root);
  return framed(kManifestMagic, fbb);
}

void write_manifest(const TempDir& dir, ManifestFields& m, MemoryBudget& budget, uint64_t io_bytes,
                    const std::function<void(FileWriter&)>& write_labels,
                    const std::function<void(FileWriter&)>& write_classes) {
  m.labels_offset = align_up(manifest_bytes(m).size());  // the size does not depend on the value
  auto header = manifest_bytes(m);
  FGM_ASSERT(align_up(header.size()) == m.labels_offset);
  FileWriter out(dir.file(kManifestName), budget, io_bytes, "store manifest writer");
  out.write(header.data(), header.size());
  out.pad_to(m.labels_offset);
  write_labels(out);
  FGM_ASSERT(out.position() == m.labels_offset + m.n_rows);
  out.pad_to(classes_offset(m));
  write_classes(out);
  out.close(true);
}

}  // namespace fgm::store
