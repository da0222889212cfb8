// Randomized (seeded) KvCacheManager stress test: random admissions with prefix hits, growth,
// copy-on-write, publication and frees over a small vocabulary (so prefixes repeat), checking the
// pool invariants and table/ref-count agreement after every operation.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace keel::kv {
namespace {

struct Seq {
  std::vector<int32_t> tokens;
  int32_t computed = 0;
};

class Stress {
 public:
  Stress(uint32_t seed, int32_t num_blocks, int32_t block_size)
      : rng_(seed), kv_(KvCacheConfig{num_blocks, block_size, true}) {}

  void step() {
    const int op = pick(0, 9);
    if (op < 3) {
      admit();
    } else if (op < 8) {
      grow();
    } else {
      release();
    }
  }
  const KvCacheManager& kv() const { return kv_; }
  int64_t hits() const { return kv_.prefix_hits_tokens(); }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  void admit() {
    Seq s;
    // Prompts from 3 stems so that prefixes repeat, plus a random tail.
    const int stem = pick(0, 2);
    const int stem_len = pick(0, 20);
    for (int i = 0; i < stem_len; ++i) s.tokens.push_back(stem * 100 + i);
    const int tail = pick(1, 10);
    for (int i = 0; i < tail; ++i) s.tokens.push_back(pick(0, 3));
    const RequestKey id = next_id_++;
    const auto hit = kv_.find_prefix(s.tokens, extra_);
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    if (!kv_.allocate(id, n, &hit).has_value()) return;
    s.computed = hit.num_tokens;
    if (hit.num_tokens % kv_.block_size() != 0) {
      const auto w = kv_.make_writable(id, hit.num_tokens);
      if (w.no_room) {
        kv_.free(id);
        return;
      }
    }
    s.computed = n;
    kv_.publish_full_blocks(id, s.tokens, s.computed, extra_);
    seqs_[id] = std::move(s);
  }

  void grow() {
    if (seqs_.empty()) return;
    auto it = std::next(seqs_.begin(), pick(0, static_cast<int>(seqs_.size()) - 1));
    Seq& s = it->second;
    const int add = pick(1, 6);
    for (int i = 0; i < add; ++i) s.tokens.push_back(pick(0, 3));
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    if (!kv_.allocate(it->first, n).has_value()) {
      s.tokens.resize(s.computed);
      return;
    }
    // Decode never writes into a shared block.
    const auto w = kv_.make_writable(it->first, s.computed);
    ASSERT_FALSE(w.copy.has_value());
    s.computed = n;
    kv_.publish_full_blocks(it->first, s.tokens, s.computed, extra_);
  }

  void release() {
    if (seqs_.empty()) return;
    auto it = std::next(seqs_.begin(), pick(0, static_cast<int>(seqs_.size()) - 1));
    kv_.free(it->first);
    seqs_.erase(it);
  }

  std::mt19937 rng_;
  KvCacheManager kv_;
  BlockHash extra_ = request_extra_key(BlockHash{1, 1}, "");
  std::map<RequestKey, Seq> seqs_;
  RequestKey next_id_ = 1;
};

TEST(KvCacheManagerStressTest, InvariantsHoldUnderRandomOperations) {
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    Stress stress(seed, /*num_blocks=*/24, /*block_size=*/4);
    for (int i = 0; i < 3000; ++i) {
      stress.step();
      const Status s = stress.kv().check_invariants();
      ASSERT_TRUE(s.ok()) << "seed " << seed << " op " << i << ": " << s.to_string();
      ASSERT_GE(stress.kv().num_free_blocks(), 0);
    }
    EXPECT_GT(stress.hits(), 0) << "the workload should exercise prefix hits";
  }
}

}  // namespace
}  // namespace keel::kv
