// ModelStore (store/model_store.h) over a scratch directory: preload builds an entry once, find
// and choose_source hand out its path, a corrupt entry makes choose_source fall back to the file
// with the reason (and a later preload replaces it), the budget evicts the least recently used
// entry and refuses what cannot fit, and files that are not entries are never touched.
#include "store/model_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/random_model.h"
#include "store/store_entry.h"
#include "support/test_support.h"

namespace keel::store {
namespace {

std::string write_model(const std::string& dir, const std::string& name, uint64_t seed) {
  ThreadPool pool(1);
  model::RandomModelSpec spec;
  spec.shape = *model::find_model_shape("tiny");
  spec.weight_type = DType::kQ8_0;
  spec.seed = seed;
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(model::write_random_model(spec, path, pool).ok());
  return path;
}

class ModelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = testing::make_temp_dir("store-src");
    shm_ = testing::make_temp_dir("store-shm");
  }
  ModelStore store(uint64_t budget) { return ModelStore({shm_, budget}, &fs_); }
  PosixFileSystem fs_;
  std::string src_, shm_;
};

TEST_F(ModelStoreTest, PreloadBuildsOnceAndChooseSourcePicksTheEntry) {
  const std::string a = write_model(src_, "a.gguf", 1);
  ModelStore s = store(0);
  auto first = s.preload(a, "test");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_FALSE(first->already_present);
  EXPECT_EQ(first->path, s.path_of(first->key));
  auto again = s.preload(a, "test");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_present);
  EXPECT_EQ(again->bytes, first->bytes);

  const ModelSource by_path = s.choose_source(a, std::nullopt, "test");
  EXPECT_TRUE(by_path.from_store) << by_path.store_error.to_string();
  EXPECT_EQ(by_path.path, first->path);
  const ModelSource by_key = s.choose_source("/nonexistent.gguf", first->key, "test");
  EXPECT_TRUE(by_key.from_store) << "a binder that knows the key needs no file";
  const ModelSource other_isa = s.choose_source(a, std::nullopt, "other");
  EXPECT_FALSE(other_isa.from_store);
  EXPECT_EQ(other_isa.path, a);
  EXPECT_EQ(other_isa.store_error.code(), StatusCode::kNotFound);

  auto listed = s.entries();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, first->key);
}

TEST_F(ModelStoreTest, CorruptEntryFallsBackToTheFileAndIsRebuilt) {
  const std::string a = write_model(src_, "a.gguf", 1);
  ModelStore s = store(0);
  auto pre = s.preload(a, "test");
  ASSERT_TRUE(pre.ok());
  ::chmod(pre->path.c_str(), 0644);
  ASSERT_EQ(::truncate(pre->path.c_str(), 1000), 0);  // a partial entry
  const ModelSource src = s.choose_source(a, std::nullopt, "test");
  EXPECT_FALSE(src.from_store);
  EXPECT_EQ(src.path, a);
  EXPECT_EQ(src.store_error.code(), StatusCode::kCorrupt) << src.store_error.to_string();
  EXPECT_NE(src.store_error.message().find(pre->path), std::string::npos)
      << "the error names the entry: " << src.store_error.to_string();
  auto rebuilt = s.preload(a, "test");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().to_string();
  EXPECT_FALSE(rebuilt->already_present);
  EXPECT_TRUE(s.choose_source(a, std::nullopt, "test").from_store);
}

TEST_F(ModelStoreTest, BudgetEvictsTheLeastRecentlyUsedAndLeavesOtherFilesAlone) {
  const std::string a = write_model(src_, "a.gguf", 1);
  const std::string b = write_model(src_, "b.gguf", 2);
  const std::string c = write_model(src_, "c.gguf", 3);
  const uint64_t size = std::filesystem::file_size(a);
  std::ofstream(shm_ + "/unrelated") << "not ours";
  std::ofstream(shm_ + "/keel-store-notanentry") << "not ours either";
  ModelStore s = store(size * 5 / 2);  // room for two entries
  auto ea = s.preload(a, "test");
  ASSERT_TRUE(ea.ok()) << ea.status().to_string();
  auto eb = s.preload(b, "test");
  ASSERT_TRUE(eb.ok()) << eb.status().to_string();
  EXPECT_TRUE(eb->evicted.empty());
  // a is used after b was built: b becomes the least recently used.
  struct timespec old[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, eb->path.c_str(), old, 0), 0);
  ASSERT_TRUE(s.find(ea->key).ok());
  auto ec = s.preload(c, "test");
  ASSERT_TRUE(ec.ok()) << ec.status().to_string();
  EXPECT_EQ(ec->evicted, std::vector<std::string>{entry_name(eb->key)});
  EXPECT_TRUE(std::filesystem::exists(ea->path));
  EXPECT_FALSE(std::filesystem::exists(eb->path));
  EXPECT_TRUE(std::filesystem::exists(shm_ + "/unrelated"));
  EXPECT_TRUE(std::filesystem::exists(shm_ + "/keel-store-notanentry"));

  // Without leave to evict, b (room only after evicting a or c) is refused and nothing goes.
  auto kept = s.preload(b, "test", /*may_evict=*/false);
  ASSERT_FALSE(kept.ok());
  EXPECT_EQ(kept.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(kept.status().message().find("only by evicting"), std::string::npos)
      << kept.status().message();
  EXPECT_TRUE(std::filesystem::exists(ea->path));
  EXPECT_TRUE(std::filesystem::exists(ec->path));
  EXPECT_FALSE(std::filesystem::exists(eb->path));
  EXPECT_TRUE(s.preload(a, "test", /*may_evict=*/false).ok()) << "present: nothing to evict";

  ModelStore tiny = store(size / 2);
  auto refused = tiny.preload(b, "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(std::filesystem::exists(ea->path)) << "a refused preload evicts nothing";
}

}  // namespace
}  // namespace keel::store
