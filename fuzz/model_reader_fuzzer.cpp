// Model reader (read_model). Byte 0 bit 0: repair the preamble's length and
// XXH64 so that mutations reach the FlatBuffer verifier and the field checks
// behind it (a crafted file can carry a valid checksum); the rest of the input
// is the file's bytes.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/hash.h"
#include "fuzz/fuzz_support.h"
#include "io/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr size_t kPreamble = 24;  // magic, uint64 length, uint64 XXH64
  if ((data[0] & 1) && file.size() >= kPreamble) {
    uint64_t len = file.size() - kPreamble;
    uint64_t sum = fgm::xxh64(file.data() + kPreamble, len);
    std::memcpy(file.data() + 8, &len, 8);
    std::memcpy(file.data() + 16, &sum, 8);
  }
  const auto path = fgm::fuzz::scratch_dir() / "model.fgmm";
  fgm::fuzz::write_bytes(path, file);
  fgm::fuzz::expect_clean_outcome([&] { (void)fgm::read_model(path.string()); });
  return 0;
}
