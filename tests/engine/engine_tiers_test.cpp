// The KV tiers through the engine with a real model (stories260K): cached blocks evicted from a
// small pool are demoted to the host tier and promoted back on a repeat of the prompt; the disk
// tier brings them back after an engine restart; damaged disk files are never served; a slow tier
// makes the cost model recompute instead; a request whose tier reads are held back waits as
// populating while another runs to completion. In every case the greedy output equals the first,
// fully computed run.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "engine/model_identity.h"
#include "engine_test_util.h"
#include "tier_test_util.h"

namespace keel::engine {
namespace {

// small_pool_config() with a disk tier in a fresh directory named after `tag`.
EngineConfig disk_config(const std::string& tag) {
  EngineConfig c = small_pool_config();
  c.kv_disk_dir = testing::make_temp_dir(tag);
  c.kv_disk_bytes = 64 << 20;
  return c;
}

// Runs prompt(300) on an engine over `c`, then churns its blocks out of the pool onto the disk
// tier; returns the prompt's greedy output (the fully computed reference).
std::vector<int32_t> seed_disk(const model::Model& model, const EngineConfig& c) {
  auto e = Engine::start(model, c);
  EXPECT_TRUE(e.ok()) << e.error().to_string();
  if (!e.ok()) return {};
  std::vector<int32_t> want = run_one(**e, greedy(prompt(300), 8));
  churn(**e);
  EXPECT_GT((*e)->stats().disk_tier.blocks, 0);
  return want;
}

TEST(EngineTiersTest, EvictedBlocksComeBackFromTheHostTier) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = small_pool_config();
  c.kv_host_bytes = 64 << 20;
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  Engine& engine = **e;
  ASSERT_EQ(engine.num_kv_blocks(), 12);

  auto first = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine.submit(greedy(prompt(300), 8), first).ok());
  const std::vector<int32_t> want = first->wait();
  churn(engine);
  EXPECT_GT(engine.stats().host_tier.blocks, 0);
  const int64_t hits_before = engine.stats().host_tier.hits;

  auto again = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine.submit(greedy(prompt(300), 8), again).ok());
  EXPECT_EQ(again->wait(), want);
  EXPECT_EQ(again->cached(), 3 * kBlock);  // from T1: the pool no longer held them
  EXPECT_GE(engine.stats().host_tier.hits - hits_before, 3);
  EXPECT_TRUE(engine.stats().host_tier_enabled);
  EXPECT_FALSE(engine.stats().disk_tier_enabled);
}

// The KV transfer hooks: a prefill engine's published blocks, read out by hash and filed in a
// decode engine's host tier, are fetched there instead of recomputed; a missing block cuts the
// chain and the rest is recomputed — the output is the same either way.
TEST(EngineTiersTest, BlocksFromAPeerEngineAreFetchedNotRecomputed) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = small_pool_config();
  c.kv_host_bytes = 64 << 20;
  auto prefill = Engine::start(*model, c);
  ASSERT_TRUE(prefill.ok()) << prefill.error().to_string();
  const std::vector<int32_t> want = run_one(**prefill, greedy(prompt(300), 8));
  const std::vector<kv::BlockHash> hashes =
      prefix_block_hashes((*prefill)->model_key(), "", prompt(300), kBlock);
  ASSERT_EQ(hashes.size(), 4u);
  std::vector<std::vector<std::byte>> blocks;
  for (const kv::BlockHash& h : hashes) {
    blocks.emplace_back((*prefill)->kv_block_bytes());
    ASSERT_TRUE((*prefill)->kv_connector().read_block(h, blocks.back()).ok());
  }
  std::vector<std::byte> scratch((*prefill)->kv_block_bytes());
  EXPECT_EQ((*prefill)->kv_connector().read_block({1, 2}, scratch).code(), StatusCode::kNotFound);
  EXPECT_EQ((*prefill)->kv_connector().read_block(hashes[0], std::span(scratch).first(8)).code(),
            StatusCode::kInvalidArgument);

  for (const bool complete : {true, false}) {
    auto decode = Engine::start(*model, c);
    ASSERT_TRUE(decode.ok()) << decode.error().to_string();
    EXPECT_EQ((*decode)->kv_connector().kv_identity(), (*prefill)->kv_connector().kv_identity());
    for (size_t i = 0; i < hashes.size(); ++i) {
      if (!complete && i == 1) continue;  // lost in transit
      ASSERT_TRUE((*decode)->kv_connector().accept_block(hashes[i], blocks[i]).ok());
    }
    auto sink = std::make_shared<CollectingSink>();
    ASSERT_TRUE((*decode)->submit(greedy(prompt(300), 8), sink).ok());
    EXPECT_EQ(sink->wait(), want);
    EXPECT_EQ(sink->cached(), complete ? 3 * kBlock : kBlock);
  }
  EngineConfig no_tier = small_pool_config();
  auto bare = Engine::start(*model, no_tier);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ((*bare)->kv_connector().accept_block(hashes[0], blocks[0]).code(),
            StatusCode::kUnavailable);
}

TEST(EngineTiersTest, DiskTierSurvivesARestartAndDamageIsRecomputed) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  const EngineConfig c = disk_config("engine_disk_tier");
  const std::vector<int32_t> want = seed_disk(*model, c);
  {  // a new engine (a restart): the prompt's blocks come from disk
    auto e = Engine::start(*model, c);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    EXPECT_GT((*e)->stats().disk_tier.blocks, 0);
    auto sink = std::make_shared<CollectingSink>();
    ASSERT_TRUE((*e)->submit(greedy(prompt(300), 8), sink).ok());
    EXPECT_EQ(sink->wait(), want);
    EXPECT_EQ(sink->cached(), 3 * kBlock);
    EXPECT_GE((*e)->stats().disk_tier.hits, 3);
    EXPECT_EQ((*e)->stats().tier_blocks_fetched, 3);
  }
  // Damage every stored block's payload between restarts: nothing may be served from disk.
  for (const auto& dir : std::filesystem::recursive_directory_iterator(c.kv_disk_dir)) {
    if (!dir.is_regular_file()) continue;
    std::fstream f(dir.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE((*e)->submit(greedy(prompt(300), 8), sink).ok());
  EXPECT_EQ(sink->wait(), want);
  EXPECT_EQ(sink->cached(), 0);
  EXPECT_GE((*e)->stats().disk_tier.corrupt, 1);
  EXPECT_EQ((*e)->stats().disk_tier.hits, 0);
}

// The real file system, with `before_read` run before every read (a delay or a gate).
class HookedReadFileSystem final : public FileSystem {
 public:
  explicit HookedReadFileSystem(std::function<void()> before_read)
      : before_read_(std::make_shared<std::function<void()>>(std::move(before_read))) {}
  Result<std::unique_ptr<RandomAccessFile>> open_readable(const std::string& path) override {
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, base_.open_readable(path));
    return std::unique_ptr<RandomAccessFile>(new HookedFile(std::move(f), before_read_));
  }
  Result<std::unique_ptr<WritableFile>> open_writable(const std::string& path) override {
    return base_.open_writable(path);
  }
  bool exists(const std::string& path) override { return base_.exists(path); }
  Status create_directories(const std::string& path) override {
    return base_.create_directories(path);
  }
  Status rename(const std::string& from, const std::string& to) override {
    return base_.rename(from, to);
  }
  Status remove(const std::string& path) override { return base_.remove(path); }
  Result<std::vector<std::string>> list_directory(const std::string& dir) override {
    return base_.list_directory(dir);
  }

 private:
  class HookedFile final : public RandomAccessFile {
   public:
    HookedFile(std::unique_ptr<RandomAccessFile> f, std::shared_ptr<std::function<void()>> hook)
        : f_(std::move(f)), hook_(std::move(hook)) {}
    const std::string& path() const override { return f_->path(); }
    uint64_t size() const override { return f_->size(); }
    Status read_at(uint64_t offset, size_t n, void* dst) const override {
      (*hook_)();
      return f_->read_at(offset, n, dst);
    }
    Result<std::unique_ptr<MappedRegion>> map() const override { return f_->map(); }

   private:
    std::unique_ptr<RandomAccessFile> f_;
    std::shared_ptr<std::function<void()>> hook_;
  };
  std::shared_ptr<std::function<void()>> before_read_;
  PosixFileSystem base_;
};

// A gate that reads wait at while it is closed (the test holds a tier read back).
class Gate {
 public:
  void set_open(bool open) {
    {
      std::lock_guard lock(mu_);
      open_ = open;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
};

TEST(EngineTiersTest, SlowTierFlipsTheDecisionToRecompute) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  const EngineConfig c = disk_config("engine_slow_tier");
  const std::vector<int32_t> want = seed_disk(*model, c);  // a normal disk first
  // Restart over a file system whose reads take 30 ms: fetching a 16-token block now costs more
  // than recomputing it (stories260K prefills a token in well under 1 ms).
  auto e = Engine::start(*model, c, std::make_unique<HookedReadFileSystem>([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  ASSERT_GT((*e)->stats().disk_tier.blocks, 0);
  run_one(**e, greedy(prompt(400), 4));  // measures the prefill cost
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE((*e)->submit(greedy(prompt(300), 8), sink).ok());
  EXPECT_EQ(sink->wait(), want);
  EXPECT_EQ(sink->cached(), 0);
  EXPECT_GE((*e)->stats().tier_blocks_recomputed, 3);
  EXPECT_EQ((*e)->stats().tier_blocks_fetched, 0);
  EXPECT_EQ((*e)->stats().disk_tier.hits, 0);
}

TEST(EngineTiersTest, OtherRequestsRunWhileOneIsPopulating) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = disk_config("engine_populating");
  c.scheduler.max_num_seqs = 2;
  const std::vector<int32_t> want_a = seed_disk(*model, c);
  std::vector<int32_t> want_b;
  {
    auto e = Engine::start(*model, small_pool_config());
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    want_b = run_one(**e, greedy({1, 50, 60, 70}, 6));
  }
  auto gate = std::make_shared<Gate>();
  auto e =
      Engine::start(*model, c, std::make_unique<HookedReadFileSystem>([gate] { gate->wait(); }));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  gate->set_open(false);  // A's tier reads now wait until the gate opens
  auto a = std::make_shared<CollectingSink>();
  ASSERT_TRUE((*e)->submit(greedy(prompt(300), 8), a).ok());
  auto b = std::make_shared<CollectingSink>();
  ASSERT_TRUE((*e)->submit(greedy({1, 50, 60, 70}, 6), b).ok());
  EXPECT_EQ(b->wait(), want_b);           // B ran to the end while A was populating
  EXPECT_FALSE(a->finish().has_value());  // A is still waiting for its blocks
  gate->set_open(true);
  EXPECT_EQ(a->wait(), want_a);
  EXPECT_EQ(a->cached(), 3 * kBlock);
  EXPECT_EQ((*e)->stats().tier_blocks_fetched, 3);
}

TEST(EngineTiersTest, TierFlagsAreValidated) {
  EngineConfig c = base_config();
  c.kv_disk_dir = "/tmp/x";
  EXPECT_EQ(c.validate().code(), StatusCode::kInvalidArgument);  // no --kv-disk-bytes
  c.kv_disk_bytes = 1 << 20;
  EXPECT_TRUE(c.validate().ok());
  c.enable_prefix_cache = false;
  EXPECT_EQ(c.validate().code(), StatusCode::kInvalidArgument);
  c = base_config();
  c.kv_host_bytes = -1;
  EXPECT_EQ(c.validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::engine
