#include "gguf/reader.h"

#include <gtest/gtest.h>

#include "support/test_support.h"

namespace keel::gguf {
namespace {

TEST(GgufReaderTest, ReadsStoriesModel) {
  KEEL_REQUIRE_SHARED();
  for (DataMode mode : {DataMode::kRead, DataMode::kMmap, DataMode::kNone}) {
    ReadOptions opts;
    opts.mode = mode;
    auto file = GgufFile::open(testing::shared_path("models/stories260K/stories260K.gguf"), opts);
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

}  // namespace
}  // namespace keel::gguf
