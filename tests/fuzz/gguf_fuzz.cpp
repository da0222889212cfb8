// libFuzzer target: GgufFile::open on arbitrary bytes (held in a MemoryFileSystem) in every
// DataMode; a successful open has every tensor view touched so ASan sees any escape. Built by the
// fuzz preset (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gguf/reader.h"
#include "test_file_systems.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace keel::gguf;
  test_util::MemoryFileSystem fs;
  std::vector<std::byte> bytes(size);
  if (size > 0) std::memcpy(bytes.data(), data, size);
  fs.put("/fuzz.gguf", std::move(bytes));
  for (DataMode mode : {DataMode::kRead, DataMode::kMmap, DataMode::kNone}) {
    ReadOptions opts;
    opts.mode = mode;
    opts.fs = &fs;
    auto f = GgufFile::open("/fuzz.gguf", opts);
    if (!f.ok()) continue;
    unsigned sum = 0;
    for (const TensorInfo& t : f->tensors()) {
      auto view = f->tensor_data(t);
      if (!view.empty())
        sum += static_cast<unsigned>(view.front()) + static_cast<unsigned>(view.back());
    }
    volatile unsigned sink = sum;
    (void)sink;
  }
  return 0;
}
