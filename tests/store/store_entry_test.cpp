// Store entries (store/store_entry.h): a model mapped from its entry gives the same logits as the
// model loaded from its GGUF (stories260K, and a random Q4_0 model whose matrices are regrouped),
// its matrices point into the shared mapping of the entry file (checked in /proc/self/maps, not
// through keel), it keeps the source's KV identity, and a truncated, foreign or mismatched entry
// is refused with a Corrupt error naming the problem. An MoE entry maps as an expert shard (the
// kept experts grouped, the rest empty); a sharded model cannot be stored.
#include "store/store_entry.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/model_identity.h"
#include "model/group_weights.h"
#include "model/random_model.h"
#include "support/test_support.h"
#include "test_util.h"

namespace keel::store {
namespace {

using model::testing::Runner;

const std::vector<int32_t> kPrompt = {1, 17, 5, 39, 22, 8, 30};

// The [start, end) ranges of this process's mappings of `path`.
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::string line;
  const std::string canonical = std::filesystem::canonical(path).string();
  while (std::getline(maps, line)) {
    if (!line.ends_with(" " + canonical)) continue;
    uintptr_t lo = 0, hi = 0;
    std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi);
    out.emplace_back(lo, hi);
  }
  return out;
}

bool inside(const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges, const void* p, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const auto& [lo, hi] : ranges) {
    if (a >= lo && a + n <= hi) return true;
  }
  return false;
}

std::string random_q4_model(const std::string& dir) {
  ThreadPool pool(1);
  model::RandomModelSpec spec;
  spec.shape = *model::find_model_shape("tiny");
  spec.weight_type = DType::kQ4_0;
  spec.seed = 9;
  const std::string path = dir + "/q4.gguf";
  EXPECT_TRUE(model::write_random_model(spec, path, pool).ok());
  return path;
}

// Writes `source`'s entry, maps it, and checks it against the file: same logits, matrices in the
// mapping, same KV identity, same layouts.
void check_round_trip(const std::string& source, const std::string& dir, bool expect_grouped) {
  model::ModelOptions opts;
  opts.n_ctx = 64;
  const StoreKey key{0x1234, model::kGroupedLayoutVersion, "test"};
  const std::string entry = dir + "/" + entry_name(key);
  PosixFileSystem fs;
  {
    auto m = model::Model::open(source, opts);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto bytes = write_entry(**m, key, entry, fs);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    EXPECT_GT(*bytes, 0u);
  }
  struct stat st {};
  ASSERT_EQ(::stat(entry.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u) << "entries are read-only once written";
  EXPECT_TRUE(check_entry(entry, key).ok());

  auto mapped = map_entry(entry, key, opts);
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  const model::Weights& w = (*mapped)->weights();
  const auto ranges = mappings_of(entry);
  ASSERT_FALSE(ranges.empty()) << "the entry is not mapped";
  for (const kernels::Matrix* m :
       {&w.token_embd, &w.output, &w.layers[0].wq, &w.layers[0].w_down, &w.layers.back().w_up}) {
    EXPECT_TRUE(inside(ranges, m->data, m->row_bytes * static_cast<size_t>(m->rows)))
        << "a matrix lies outside the entry's mapping";
  }
  EXPECT_EQ(w.layers[0].wq.layout,
            expect_grouped ? kernels::WeightLayout::kGrouped16 : kernels::WeightLayout::kRows);

  auto file_meta = gguf::GgufFile::open(source, {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(file_meta.ok());
  EXPECT_EQ(*engine::model_identity(*file_meta), *engine::model_identity((*mapped)->file()));

  Runner from_file(source, opts, 1, 64, {.n_seqs = 1});
  ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
  EXPECT_EQ(from_file.model().weights().layers[0].wq.layout, w.layers[0].wq.layout);
  Runner from_store(std::move(*mapped), 1, 64, {.n_seqs = 1});
  ASSERT_TRUE(from_store.ok()) << from_store.status().to_string();
  const int32_t n = static_cast<int32_t>(from_file.n_vocab());
  const std::vector<int32_t> prompt = {1, 5 % n, 17 % n, 3 % n, 9 % n};
  const auto want = from_file.feed(prompt, 0);
  const auto got = from_store.feed(prompt, 0);
  ASSERT_EQ(want.size(), got.size());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
}

TEST(StoreEntryTest, Stories260KFromTheMappingMatchesTheFile) {
  KEEL_REQUIRE_SHARED();
  check_round_trip(testing::shared_path("models/stories260K/stories260K.gguf"),
                   testing::make_temp_dir("store-entry-stories"), false);  // F32: not grouped
}

TEST(StoreEntryTest, RandomQ4ModelIsStoredGroupedAndMatchesTheFile) {
  const std::string dir = testing::make_temp_dir("store-entry-q4");
  check_round_trip(random_q4_model(dir), dir, true);
}

// An entry of a whole MoE model, mapped by an expert shard: its grouped list is checked against
// every view before the unkept ones are emptied, so the kept experts come out grouped. A sharded
// model has unread bytes and is refused as an entry's source.
TEST(StoreEntryTest, MoeEntriesMapAsExpertShardsAndShardsAreNotStored) {
  const std::string dir = testing::make_temp_dir("store-entry-moe");
  ThreadPool pool(1);
  model::RandomModelSpec spec;
  spec.shape = *model::find_model_shape("qwen3moe-tiny");
  spec.weight_type = DType::kQ8_0;
  const std::string source = dir + "/moe.gguf";
  ASSERT_TRUE(model::write_random_model(spec, source, pool).ok());
  const StoreKey key{0x77, model::kGroupedLayoutVersion, "test"};
  const std::string entry = dir + "/" + entry_name(key);
  PosixFileSystem fs;
  model::ModelOptions sharded;
  sharded.expert_shard = {1, 2, true};
  {
    auto m = model::Model::open(source, sharded);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto refused = write_entry(**m, key, entry, fs);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    auto whole = model::Model::open(source);
    ASSERT_TRUE(whole.ok());
    ASSERT_TRUE(write_entry(**whole, key, entry, fs).ok());
  }
  auto mapped = map_entry(entry, key, sharded);
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  const model::MoeWeights& moe = (*mapped)->weights().layers[0].moe;
  EXPECT_EQ(moe.up[0].data, nullptr);
  EXPECT_EQ(moe.up[moe.up.size() - 1].layout, kernels::WeightLayout::kGrouped16);  // shard 1's
  EXPECT_EQ((*mapped)->weights().layers[0].wq.data, nullptr);
}

class BadEntryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("store-bad-entry");
    auto m = model::Model::open(random_q4_model(dir_), {.n_ctx = 64});
    ASSERT_TRUE(m.ok());
    PosixFileSystem fs;
    entry_ = dir_ + "/" + entry_name(key_);
    ASSERT_TRUE(write_entry(**m, key_, entry_, fs).ok());
    ::chmod(entry_.c_str(), 0644);  // the tests damage it
  }
  const StoreKey key_{0x99, model::kGroupedLayoutVersion, "test"};
  std::string dir_, entry_;
};

TEST_F(BadEntryTest, TruncatedEntryIsCorrupt) {
  ASSERT_EQ(::truncate(entry_.c_str(), static_cast<off_t>(std::filesystem::file_size(entry_) / 2)),
            0);
  const Status s = check_entry(entry_, key_);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.to_string();
  EXPECT_FALSE(map_entry(entry_, key_, {}).ok());
}

TEST_F(BadEntryTest, EntryForAnotherKeyIsRefused) {
  const StoreKey other{0x98, model::kGroupedLayoutVersion, "test"};
  const Status s = check_entry(entry_, other);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("not for '" + entry_name(other) + "'"), std::string::npos)
      << s.to_string();
  EXPECT_FALSE(map_entry(entry_, other, {}).ok());
}

TEST_F(BadEntryTest, PlainGgufIsNotAnEntry) {
  const std::string plain = dir_ + "/q4.gguf";
  const Status s = check_entry(plain, key_);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("not a model store entry"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace keel::store
