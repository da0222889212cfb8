// summarize_lora: an adapter read without its base model gives the engine's content digest
// (the cluster's routers key adapter prompts with it), its rank, scale and targets; files that
// are not adapters are refused with the file named.
#include "model/lora_summary.h"

#include <gtest/gtest.h>

#include <limits>

#include "model/lora_adapter.h"
#include "model/random_lora.h"
#include "support/test_support.h"
#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

TEST(LoraSummaryTest, MatchesTheLoadedAdapter) {
  const TinyModel tiny = write_tiny_model(TinySpec{});
  Runner r(tiny.path);
  ASSERT_TRUE(r.ok());
  const std::string dir = keel::testing::make_temp_dir("lora-summary");
  RandomLoraSpec ls;
  ls.rank = 4;
  ls.alpha = 2.0f;
  ls.targets = {LoraTarget::kK, LoraTarget::kUp};
  ASSERT_TRUE(write_random_lora(ls, r.model(), dir + "/a.gguf").ok());
  ls.seed = 2;
  ls.dtype = DType::kF16;
  ASSERT_TRUE(write_random_lora(ls, r.model(), dir + "/b.gguf").ok());
  for (const std::string name : {"/a.gguf", "/b.gguf"}) {
    for (const float scale : {1.0f, 0.5f}) {
      auto adapter = LoraAdapter::open(dir + name, r.model(), scale);
      Result<LoraSummary> s = summarize_lora(dir + name, scale);
      ASSERT_TRUE(adapter.ok() && s.ok()) << s.status().to_string();
      EXPECT_EQ(s->content_digest, (*adapter)->content_digest()) << name << " " << scale;
      EXPECT_EQ(s->rank, (*adapter)->rank());
      EXPECT_FLOAT_EQ(s->effective_scale, (*adapter)->effective_scale());
      EXPECT_EQ(s->targets, (*adapter)->targets_string());
      EXPECT_EQ(s->path, dir + name);
    }
  }
  EXPECT_NE(summarize_lora(dir + "/a.gguf")->content_digest,
            summarize_lora(dir + "/b.gguf")->content_digest);
}

TEST(LoraSummaryTest, RefusesWhatIsNotAnAdapter) {
  const TinyModel tiny = write_tiny_model(TinySpec{});
  Result<LoraSummary> s = summarize_lora(tiny.path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("not a LoRA adapter"), std::string::npos)
      << s.status().to_string();
  EXPECT_NE(s.status().message().find(tiny.path), std::string::npos);
  EXPECT_FALSE(summarize_lora(tiny.path + ".missing").ok());
  EXPECT_FALSE(summarize_lora(tiny.path, std::numeric_limits<float>::infinity()).ok());
}

}  // namespace
}  // namespace keel::model::testing
