// LoRA adapters through the engine with a real model (stories260K) and random adapters
// (model/random_lora.h):
//   - requests with different adapters and the base model, submitted together (batched in the
//     same steps), generate exactly what each generates alone, and an adapter changes the text;
//   - the prefix cache is keyed by adapter: a prompt cached by the base model (or another
//     adapter) is not a hit for an adapter, a repeat with the same adapter is; the stored blocks'
//     cache events carry the adapter's keys (lora_prefix_key), which a router computes apart
//     from the base model's;
//   - unknown names, duplicate loads, bad files and unloading (even while a request uses the
//     adapter) give precise errors and never crash.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "engine/model_identity.h"
#include "engine/named_lora.h"
#include "engine_test_util.h"
#include "model/random_lora.h"

namespace keel::engine {
namespace {

constexpr int32_t kBlock = 16;

std::vector<int32_t> prompt(int32_t base, int32_t n) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < n; ++i) p.push_back(base + i);
  return p;
}

class EngineLoraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    model_ = load_stories();
    ASSERT_NE(model_, nullptr);
    dir_ = testing::make_temp_dir("engine-lora");
    for (uint64_t seed : {1u, 2u}) {
      model::RandomLoraSpec spec;
      spec.rank = 8;
      spec.seed = seed;
      spec.b_std = 0.6f / std::sqrt(8.0f);  // strong enough to change stories260K's greedy text
      ASSERT_TRUE(write_random_lora(spec, *model_, path(seed)).ok());
    }
  }
  std::string path(uint64_t seed) const { return dir_ + "/lora" + std::to_string(seed) + ".gguf"; }
  std::unique_ptr<Engine> start(EngineDeps deps = {}) {
    EngineConfig c = base_config();
    c.block_size = kBlock;
    auto e = Engine::start(*model_, c, std::move(deps));
    EXPECT_TRUE(e.ok()) << e.error().to_string();
    if (!e.ok()) return nullptr;
    EXPECT_TRUE((*e)->load_lora("a", path(1)).ok());
    EXPECT_TRUE((*e)->load_lora("b", path(2)).ok());
    return std::move(*e);
  }
  static GenerationRequest with(const std::string& lora, std::vector<int32_t> p, int32_t n) {
    GenerationRequest r = greedy(std::move(p), n);
    r.lora = lora;
    return r;
  }

  std::unique_ptr<model::Model> model_;
  std::string dir_;
};

TEST_F(EngineLoraTest, MixedBatchMatchesEachAlone) {
  auto e = start();
  ASSERT_NE(e, nullptr);
  const std::vector<std::string> loras = {"", "a", "b", "a", ""};
  const std::vector<int32_t> p = prompt(50, 21);
  std::vector<std::vector<int32_t>> alone;
  for (const std::string& l : loras) alone.push_back(run_one(*e, with(l, p, 16)));
  EXPECT_NE(alone[0], alone[1]) << "adapter a changed nothing";
  EXPECT_NE(alone[1], alone[2]) << "adapters a and b generate the same";
  EXPECT_EQ(alone[1], alone[3]);
  // Together: submitted at once, so they share steps (a fresh engine: no cache hits either).
  auto fresh = start();
  ASSERT_NE(fresh, nullptr);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const std::string& l : loras) {
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE(fresh->submit(with(l, p, 16), sinks.back()).ok());
  }
  for (size_t i = 0; i < loras.size(); ++i) {
    EXPECT_EQ(sinks[i]->wait(), alone[i]) << "request " << i << " (lora '" << loras[i] << "')";
  }
}

TEST_F(EngineLoraTest, PrefixCacheIsKeyedByAdapter) {
  auto e = start();
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> p = prompt(200, 40);  // 2 full blocks
  const auto cached = [&](const std::string& lora) {
    auto sink = std::make_shared<CollectingSink>();
    EXPECT_TRUE(e->submit(with(lora, p, 2), sink).ok());
    sink->wait();
    return sink->cached();
  };
  EXPECT_EQ(cached(""), 0);
  EXPECT_EQ(cached("a"), 0) << "the base model's blocks served an adapter";
  EXPECT_EQ(cached("a"), 2 * kBlock);
  EXPECT_EQ(cached("b"), 0) << "adapter a's blocks served adapter b";
  EXPECT_EQ(cached(""), 2 * kBlock);
  // The same file under another name computes the same: it shares the blocks.
  ASSERT_TRUE(e->load_lora("a-again", path(1)).ok());
  EXPECT_EQ(cached("a-again"), 2 * kBlock);
}

TEST_F(EngineLoraTest, CacheEventsCarryTheAdaptersKeys) {
  std::mutex mu;
  std::vector<kv::CacheEvent> events;
  EngineDeps deps;
  deps.cache_events = [&](std::vector<kv::CacheEvent> batch) {
    std::lock_guard lock(mu);
    for (kv::CacheEvent& ev : batch) events.push_back(std::move(ev));
  };
  auto e = start(std::move(deps));
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> p = prompt(300, 40);
  run_one(*e, with("a", p, 2));
  const kv::BlockHash model_key = e->model_key();
  auto adapter = model::LoraAdapter::open(path(1), *model_);
  ASSERT_TRUE(adapter.ok());
  const std::vector<kv::BlockHash> want =
      prefix_block_hashes(lora_prefix_key(model_key, (*adapter)->content_digest()), "", p, kBlock);
  const std::vector<kv::BlockHash> base = prefix_block_hashes(model_key, "", p, kBlock);
  e.reset();  // joins the engine thread: every event has been handed over
  std::vector<kv::BlockHash> stored;
  for (const kv::CacheEvent& ev : events) {
    if (ev.kind == kv::CacheEventKind::kStored) stored.push_back(ev.hash);
  }
  EXPECT_EQ(stored, want);
  ASSERT_EQ(base.size(), 2u);
  EXPECT_NE(base[0], want[0]);
  EXPECT_NE(base[1], want[1]);
}

TEST_F(EngineLoraTest, ErrorsAndUnloadingWhileInUse) {
  auto e = start();
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> p = prompt(70, 9);
  auto sink = std::make_shared<CollectingSink>();
  Result<RequestKey> unknown = e->submit(with("nope", p, 4), sink);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.error().message().find("no LoRA adapter named 'nope'"), std::string::npos);

  const Status dup = e->load_lora("a", path(2));
  EXPECT_EQ(dup.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.message().find("'a' is already loaded"), std::string::npos) << dup.to_string();
  const Status bad = e->load_lora("c", testing::shared_path("models/stories260K/stories260K.gguf"));
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("not a LoRA adapter"), std::string::npos) << bad.to_string();
  const Status missing = e->load_lora("c", dir_ + "/missing.gguf");
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("missing.gguf"), std::string::npos) << missing.to_string();
  EXPECT_EQ(e->unload_lora("nope").code(), StatusCode::kNotFound);

  // Unloading while a request runs with the adapter: the request finishes with it.
  const std::vector<int32_t> expected = run_one(*e, with("a", p, 48));
  auto running = std::make_shared<CollectingSink>();
  ASSERT_TRUE(e->submit(with("a", p, 48), running).ok());
  ASSERT_TRUE(e->unload_lora("a").ok());
  EXPECT_EQ(running->wait(), expected);
  EXPECT_EQ(running->finish(), FinishReason::kLength);
  Result<RequestKey> gone = e->submit(with("a", p, 4), std::make_shared<CollectingSink>());
  EXPECT_EQ(gone.error().code(), StatusCode::kNotFound);
  const std::vector<LoraInfo> left = e->list_loras();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].name, "b");
  EXPECT_EQ(left[0].rank, 8);
  EXPECT_EQ(left[0].targets, "q,k,v,o,gate,up,down");
  EXPECT_EQ(left[0].path, path(2));
}

// "NAME=PATH" as --lora and a TE's spec carry it: split at the first '=', both parts required.
TEST(NamedLoraTest, SplitsAtTheFirstEqualsAndRefusesAMissingPart) {
  Result<NamedLora> a = parse_named_lora("sql=/m/a=b.gguf");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->name, "sql");
  EXPECT_EQ(a->path, "/m/a=b.gguf");
  for (const char* bad : {"sql", "=a.gguf", "sql=", ""}) {
    Result<NamedLora> r = parse_named_lora(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("is not NAME=PATH"), std::string::npos);
  }
}

}  // namespace
}  // namespace keel::engine
