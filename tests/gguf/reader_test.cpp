// GgufFile against real files from /work/shared: the stories260K model, the quantization
// fixtures (one tensor type each) and the vocab-only tokenizer files all parse in every DataMode;
// re-writing stories260K with GgufWriter reproduces it byte for byte; damaged copies (cut in
// half, magic flipped) fail with messages naming the file and the problem.
#include "gguf/reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "gguf_test_util.h"
#include "support/test_support.h"

namespace keel::gguf {
namespace {

constexpr DataMode kModes[] = {DataMode::kRead, DataMode::kMmap, DataMode::kNone};

std::vector<std::string> gguf_files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".gguf") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufReaderTest, ReadsStoriesModel) {
  KEEL_REQUIRE_SHARED();
  for (DataMode mode : kModes) {
    ReadOptions opts;
    opts.mode = mode;
    auto file =
        GgufFile::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"), opts);
    ASSERT_TRUE(file.ok()) << file.error().to_string();
    EXPECT_EQ(file->version(), 3u);
    EXPECT_EQ(file->metadata().size(), 19u);
    EXPECT_EQ(file->tensors().size(), 48u);
    EXPECT_EQ(*file->get_string("general.architecture"), "llama");
    EXPECT_EQ(*file->get_int("llama.context_length"), 512);
    auto tokens = file->get_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok());
    EXPECT_EQ((*tokens)->items.size(), 512u);
    const TensorInfo* embd = file->find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->shape, (std::vector<int64_t>{64, 512}));
    EXPECT_EQ(embd->dtype, DType::kF32);
    EXPECT_EQ(file->tensor_data(*embd).size(), mode == DataMode::kNone ? 0u : 64u * 512u * 4u);
    EXPECT_EQ(file->get_int("missing.key").error().code(), StatusCode::kNotFound);
    EXPECT_EQ(file->get_int("general.architecture").error().code(), StatusCode::kInvalidArgument);
  }
}

TEST(GgufReaderTest, QuantFixturesParseWithTheDocumentedTypes) {
  KEEL_REQUIRE_SHARED();
  // From quant-fixtures/README.md: tensor types besides the 5 F32 norms.
  const std::map<std::string, std::map<DType, int>> expected = {
      {"fixture-f32.gguf", {{DType::kF32, 21}}},
      {"fixture-f16.gguf", {{DType::kF32, 5}, {DType::kF16, 16}}},
      {"fixture-bf16.gguf", {{DType::kF32, 5}, {DType::kBF16, 16}}},
      {"fixture-q8_0.gguf", {{DType::kF32, 5}, {DType::kQ8_0, 16}}},
      {"fixture-q4_0.gguf", {{DType::kF32, 5}, {DType::kQ4_0, 15}, {DType::kQ6_K, 1}}},
      {"fixture-q4_k_m.gguf", {{DType::kF32, 5}, {DType::kQ4_K, 13}, {DType::kQ6_K, 3}}},
      {"fixture-q5_k_m.gguf", {{DType::kF32, 5}, {DType::kQ5_K, 13}, {DType::kQ6_K, 3}}},
      {"fixture-q6_k.gguf", {{DType::kF32, 5}, {DType::kQ6_K, 16}}},
  };
  const auto files = gguf_files_in(keel::testing::shared_path("models/quant-fixtures"));
  ASSERT_EQ(files.size(), expected.size());
  for (const std::string& path : files) {
    const std::string name = std::filesystem::path(path).filename().string();
    ASSERT_TRUE(expected.count(name)) << name;
    auto read = GgufFile::open(path);
    auto mapped = GgufFile::open(path, {.mode = DataMode::kMmap});
    auto none = GgufFile::open(path, {.mode = DataMode::kNone});
    ASSERT_TRUE(read.ok()) << read.error().to_string();
    ASSERT_TRUE(mapped.ok()) << mapped.error().to_string();
    ASSERT_TRUE(none.ok()) << none.error().to_string();
    EXPECT_EQ(*read->get_string("general.architecture"), "llama") << name;
    EXPECT_EQ(*read->get_int("llama.embedding_length"), 256) << name;
    std::map<DType, int> counts;
    for (const TensorInfo& t : read->tensors()) {
      ++counts[t.dtype];
      const auto a = read->tensor_data(t);
      const auto b = mapped->tensor_data(*mapped->find_tensor(t.name));
      ASSERT_EQ(a.size(), t.num_bytes) << name << " " << t.name;
      ASSERT_EQ(b.size(), t.num_bytes) << name << " " << t.name;
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << name << " " << t.name;
      EXPECT_TRUE(none->tensor_data(*none->find_tensor(t.name)).empty());
    }
    EXPECT_EQ(counts, expected.at(name)) << name;
  }
}

TEST(GgufReaderTest, VocabFilesParse) {
  KEEL_REQUIRE_SHARED();
  const auto files = gguf_files_in(keel::testing::shared_path("vocab"));
  ASSERT_GE(files.size(), 12u);
  for (const std::string& path : files) {
    // No tensors, so the mode changes nothing but the code path after the header: alternate.
    for (DataMode mode : {kModes[(&path - files.data()) % 3]}) {
      auto f = GgufFile::open(path, {.mode = mode});
      ASSERT_TRUE(f.ok()) << f.error().to_string();
      EXPECT_TRUE(f->tensors().empty()) << path;
      auto tokens = f->get_array("tokenizer.ggml.tokens");
      ASSERT_TRUE(tokens.ok()) << tokens.error().to_string();
      EXPECT_EQ((*tokens)->type, ValueType::kString) << path;
      EXPECT_GT((*tokens)->items.size(), 1000u) << path;
      EXPECT_TRUE(f->get_string("tokenizer.ggml.model").ok()) << path;
    }
  }
}

TEST(GgufReaderTest, RewritingStoriesReproducesTheFileExactly) {
  KEEL_REQUIRE_SHARED();
  const std::string path = keel::testing::shared_path("models/stories260K/stories260K.gguf");
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  GgufWriter w(f->version());
  for (const KeyValue& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const TensorInfo& t : f->tensors()) {
    ASSERT_TRUE(w.add_tensor(t.name, t.dtype, t.shape, f->tensor_data(t)).ok()) << t.name;
  }
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.error().to_string();
  const std::vector<std::byte> original = test_util::read_bytes(path);
  ASSERT_EQ(bytes->size(), original.size());
  EXPECT_TRUE(*bytes == original);
}

TEST(GgufReaderTest, DamagedStoriesCopiesFailClearly) {
  KEEL_REQUIRE_SHARED();
  const std::vector<std::byte> original =
      test_util::read_bytes(keel::testing::shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_GT(original.size(), 1000u);
  const std::string dir = keel::testing::make_temp_dir("gguf-stories-damaged");

  const std::string half = dir + "/half.gguf";
  test_util::write_bytes(
      half, std::vector<std::byte>(original.begin(),
                                   original.begin() + static_cast<long>(original.size() / 2)));
  for (DataMode mode : kModes) {
    EXPECT_TRUE(test_util::fails_with(GgufFile::open(half, {.mode = mode}), StatusCode::kCorrupt,
                                      half, "lies outside the file's"))
        << static_cast<int>(mode);
  }

  std::vector<std::byte> flipped = original;
  flipped[0] ^= std::byte{0xff};
  const std::string bad_magic = dir + "/bad-magic.gguf";
  test_util::write_bytes(bad_magic, flipped);
  for (DataMode mode : kModes) {
    EXPECT_TRUE(test_util::fails_with(GgufFile::open(bad_magic, {.mode = mode}),
                                      StatusCode::kCorrupt, bad_magic,
                                      "bad magic: not a GGUF file (first bytes b8 47 55 46)"))
        << static_cast<int>(mode);
  }
}

}  // namespace
}  // namespace keel::gguf
