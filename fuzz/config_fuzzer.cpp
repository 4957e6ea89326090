// Config parser: the bytes before the first NUL are a TOML file, each
// NUL-separated piece after it one `key=value` command-line override. A loaded
// config is then read back through every typed getter and dump().
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  size_t nul = bytes.find('\0');
  std::string_view toml_text = bytes.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = bytes.substr(nul + 1);
    while (!rest.empty() && overrides.size() < 16) {
      size_t end = rest.find('\0');
      overrides.emplace_back(rest.substr(0, end));
      if (end == std::string_view::npos) break;
      rest.remove_prefix(end + 1);
    }
  }
  const auto path = fgm::fuzz::scratch_dir() / "fuzz.toml";
  fgm::fuzz::write_bytes(path, toml_text);

  fgm::fuzz::expect_clean_outcome([&] {
    fgm::Config config = fgm::Config::load(path.string(), overrides);
    for (const auto& spec : fgm::param_specs()) {
      if (!config.is_set(spec.key)) continue;
      (void)config.source(spec.key);
      switch (spec.type) {
        case fgm::ParamType::kInt: (void)config.get_int(spec.key); break;
        case fgm::ParamType::kFloat: (void)config.get_float(spec.key); break;
        case fgm::ParamType::kBool: (void)config.get_bool(spec.key); break;
        case fgm::ParamType::kBytes: (void)config.get_bytes(spec.key); break;
        case fgm::ParamType::kIntList:
        case fgm::ParamType::kFloatList: (void)config.get_list(spec.key); break;
        case fgm::ParamType::kStringList: (void)config.get_string_list(spec.key); break;
        default: (void)config.get_string(spec.key); break;
      }
    }
    (void)config.dump();
  });
  return 0;
}
