// LIBSVM reader. Byte 0 chooses the options; the rest is the file's bytes.
//   bit 0: index base 0 (else 1)        bit 1: declare 16 features
//   bit 2: ignore features beyond it     bits 3-5: chunk size (file mode)
//   bit 7: go through a file and
//   LibsvmReader (compression detection, tiny chunks) instead of parsing the
//   bytes as one in-memory chunk with parse_libsvm_chunk.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"
#include "io/libsvm_reader.h"

namespace {

void check_chunk_invariants(const fgm::ParsedChunk& out) {
  if (!out.error.empty()) return;
  if (out.row_ptr.size() != out.rows() + 1 || out.row_ptr.back() != out.indices.size() ||
      out.indices.size() != out.values.size() || out.lines.size() != out.rows())
    std::abort();
  for (size_t r = 0; r < out.rows(); ++r)
    for (uint64_t k = out.row_ptr[r]; k < out.row_ptr[r + 1]; ++k) {
      if (k > out.row_ptr[r] && out.indices[k] <= out.indices[k - 1]) std::abort();
      if (out.indices[k] >= out.max_index_plus_one) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  fgm::ReaderOptions options;
  options.index_base = (flags & 1) ? 0 : 1;
  options.declared_features = (flags & 2) ? 16 : 0;
  options.ignore_beyond_declared = (flags & 4) != 0;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string path = (fgm::fuzz::scratch_dir() / "input.svm").string();

  if (flags & 0x80) {
    fgm::fuzz::write_bytes(path, bytes);
    // Small chunks put many chunk boundaries inside short inputs (16 B to 2 KiB:
    // 1-byte chunks made a 100-byte bzip2 bomb of blank lines take seconds).
    options.chunk_bytes = uint64_t{16} << (flags >> 3 & 7);
    fgm::fuzz::expect_clean_outcome([&] {
      fgm::LibsvmReader reader(path, options);
      fgm::SparseRow row;
      fgm::LabelMap labels;
      while (reader.next(row)) {
        labels.observe(row.label, path, row.line, 1);
        if (row.indices.size() != row.values.size()) std::abort();
      }
    });
    return 0;
  }
  fgm::TextChunk chunk;
  chunk.text.assign(bytes);
  fgm::ParsedChunk out;
  fgm::fuzz::expect_clean_outcome([&] {
    fgm::parse_libsvm_chunk(chunk, path, options, out);
    check_chunk_invariants(out);
  });
  return 0;
}
