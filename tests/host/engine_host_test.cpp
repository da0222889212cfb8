// EngineHost with stories260K: open() reads metadata only (tokenizer, chat template, no engine);
// until start() the client answers Unavailable and ready() is false; after it, requests through
// the client generate, the model's end-of-generation ids and the tokenizer reached the engine
// (stop strings are decided there); a missing file is an error at open(). setup_compute resolves
// threads and refuses an unknown kernel table.
#include "host/engine_host.h"

#include <gtest/gtest.h>

#include "../engine/engine_test_util.h"
#include "support/test_support.h"

namespace keel::host {
namespace {

using engine::CollectingSink;

TEST(EngineHostTest, MetadataFirstThenTheEngine) {
  KEEL_REQUIRE_SHARED();
  auto opened = EngineHost::open(testing::shared_path("models/stories260K/stories260K.gguf"));
  ASSERT_TRUE(opened.ok()) << opened.error().to_string();
  EngineHost& host = **opened;
  EXPECT_GT(host.tokenizer().vocab_size(), 0);
  ASSERT_NE(host.chat_template(), nullptr);
  EXPECT_FALSE(host.random_weights());
  EXPECT_EQ(host.engine(), nullptr);
  EXPECT_FALSE(host.ready()->load());
  engine::GenerationRequest r = engine::greedy({1, 403, 407, 261, 378}, 12);
  auto early = host.client()->submit(r, std::make_shared<CollectingSink>());
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.error().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(host.client()->find_cache("x", "").has_value());

  auto compute = setup_compute({.threads = 2});
  ASSERT_TRUE(compute.ok());
  StartOptions start;
  start.compute = *compute;
  start.engine = engine::base_config();
  uint64_t last_done = 0, last_total = 0;
  ASSERT_TRUE(host.start(std::move(start),
                         [&](uint64_t done, uint64_t total) {
                           last_done = done;
                           last_total = total;
                         })
                  .ok());
  EXPECT_GT(last_total, 0u);
  EXPECT_EQ(last_done, last_total);
  ASSERT_NE(host.engine(), nullptr);
  EXPECT_TRUE(host.ready()->load());
  EXPECT_EQ(host.engine()->config().threads, 2);
  EXPECT_EQ(
      std::vector<int32_t>(host.engine()->config().eog_token_ids.begin(),
                           host.engine()->config().eog_token_ids.end()),
      std::vector<int32_t>(host.tokenizer().eog_ids().begin(), host.tokenizer().eog_ids().end()));

  // Generation through the client equals the engine's own, and a stop string finishes it there.
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(host.client()->submit(r, sink).ok());
  const std::vector<int32_t> all = sink->wait();
  EXPECT_EQ(all, engine::run_one(*host.engine(), r));
  const std::string text = host.tokenizer().decode(all, false);
  ASSERT_GT(text.size(), 6u);
  r.stop_strings = {text.substr(text.size() / 2, 3)};
  auto stopped = std::make_shared<CollectingSink>();
  ASSERT_TRUE(host.client()->submit(r, stopped).ok());
  EXPECT_LT(stopped->wait().size(), all.size());
  EXPECT_EQ(stopped->finish(), engine::FinishReason::kStop);
  EXPECT_EQ(stopped->stop_string(), 0);
}

TEST(EngineHostTest, MissingFileIsAnError) {
  auto opened = EngineHost::open(testing::make_temp_dir("host") + "/no-such-model.gguf");
  EXPECT_FALSE(opened.ok());
}

TEST(ComputeSetupTest, ResolvesThreadsAndRefusesUnknownTables) {
  auto any = setup_compute({});
  ASSERT_TRUE(any.ok());
  EXPECT_GE(any->threads, 1);
  EXPECT_FALSE(setup_compute({.isa = "no-such-isa"}).ok());
}

}  // namespace
}  // namespace keel::host
