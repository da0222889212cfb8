// parse_model_ref: Hugging Face-style references and URLs map to fetch URLs and cache paths.
#include "pull/model_ref.h"

#include <gtest/gtest.h>

namespace keel::pull {
namespace {

TEST(ModelRefTest, HuggingFaceReferences) {
  Result<ModelSource> s =
      parse_model_ref("TheOrg/Some-Model-GGUF/sub/model.Q4_0.gguf", "https://huggingface.co/");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->url.str(),
            "https://huggingface.co/TheOrg/Some-Model-GGUF/resolve/main/sub/model.Q4_0.gguf");
  EXPECT_EQ(s->cache_path, "hf/TheOrg/Some-Model-GGUF/main/sub/model.Q4_0.gguf");
  s = parse_model_ref("o/r@v1.2/m.gguf", "http://127.0.0.1:9000");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->url.str(), "http://127.0.0.1:9000/o/r/resolve/v1.2/m.gguf");
  EXPECT_EQ(s->cache_path, "hf/o/r/v1.2/m.gguf");
}

TEST(ModelRefTest, Urls) {
  Result<ModelSource> s = parse_model_ref("http://127.0.0.1:8000/a/../b/m%20x.gguf?sig=2", "");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->cache_path, "url/127.0.0.1_8000/a/b/m_20x.gguf");
  EXPECT_FALSE(parse_model_ref("http://host/", "").ok());  // no file name
}

TEST(ModelRefTest, WhatLooksRemoteAndWhatIsRejected) {
  EXPECT_TRUE(looks_remote("https://x/y.gguf"));
  EXPECT_TRUE(looks_remote("org/repo/file.gguf"));
  EXPECT_FALSE(looks_remote("/abs/path/file.gguf"));
  EXPECT_FALSE(looks_remote("./rel/path/file.gguf"));
  EXPECT_FALSE(looks_remote("file.gguf"));
  EXPECT_FALSE(looks_remote("org/file.gguf"));
  for (const char* bad :
       {"org/repo/file.bin", "org/../x.gguf/a.gguf", "o/r/a b.gguf", "o/r@/m.gguf", "o//m.gguf"}) {
    EXPECT_EQ(parse_model_ref(bad, kDefaultHfEndpoint).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace keel::pull
