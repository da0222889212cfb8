// The paged forward pass as the engine drives it, on a tiny synthetic model (always) and on
// stories260K (with shared data), over block sizes 1 / 4 / 5 / 16 and f32 / f16 / Q8_0 KV (Q8_0:
// stories260K only; the tiny model's KV row is not a multiple of 32 values), with every
// block table a random permutation of the storage's blocks:
//   - mixed steps (chunked prefills of varying sizes across several passes, decodes, a late
//     arrival, tokens of different sequences interleaved in batch order) give the logits of one
//     request at a time;
//   - a sequence sharing another's full prefix blocks, starting its pass at the first position
//     not shared, gives the logits of computing it alone, and leaves the owner's K/V intact
//     (what the prefix cache relies on);
//   - a partial block copied with copy_block continues exactly like the original (copy-on-write).
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "support/test_support.h"
#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

struct PagedCase {
  const char* name;
  bool stories;  // stories260K (needs shared data) instead of the tiny model
  int32_t block_size;
  DType kv_type;
  // Max |Δlogit| against one request at a time. f32 KV: float summation order only (the
  // attention kernel's result depends only on the token's own inputs, so normally 0). f16 KV:
  // the same f16-rounded rows on both sides, so the same bound.
  double tolerance = 1e-5;
};
void PrintTo(const PagedCase& c, std::ostream* os) { *os << c.name; }

class PagedForwardTest : public ::testing::TestWithParam<PagedCase> {
 protected:
  void SetUp() override {
    if (GetParam().stories) {
      KEEL_REQUIRE_SHARED();
      path_ = keel::testing::shared_path("models/stories260K/stories260K.gguf");
    } else {
      TinySpec spec;
      spec.n_ctx = 96;
      tiny_ = write_tiny_model(spec);
      path_ = tiny_.path;
    }
  }
  std::unique_ptr<Runner> runner(int32_t n_seqs, int32_t spare = 0, uint32_t seed = 5) {
    RunnerKv kv;
    kv.block_size = GetParam().block_size;
    kv.dtype = GetParam().kv_type;
    kv.n_seqs = n_seqs;
    kv.spare_blocks = spare;
    kv.shuffle_seed = seed;
    auto r = std::make_unique<Runner>(path_, ModelOptions(), 1, /*max_batch=*/64, kv);
    EXPECT_TRUE(r->ok()) << r->status().to_string();
    return r;
  }
  // `n` pseudo-random token ids of the model's vocabulary (never 0).
  std::vector<int32_t> tokens(Runner& r, size_t n) {
    std::uniform_int_distribution<int32_t> dist(1, static_cast<int32_t>(r.n_vocab()) - 1);
    std::vector<int32_t> out(n);
    for (auto& t : out) t = dist(rng_);
    return out;
  }
  // Logits of `toks` computed alone in a fresh single-sequence runner: the prefix [0, split) in
  // one pass, then one token per pass. [n][n_vocab]
  std::vector<float> alone(const std::vector<int32_t>& toks, size_t split) {
    auto r = runner(1, 0, 99);
    std::vector<float> out =
        r->feed({toks.begin(), toks.begin() + static_cast<ptrdiff_t>(split)}, 0);
    const std::vector<float> rest =
        r->feed({toks.begin() + static_cast<ptrdiff_t>(split), toks.end()}, 0,
                static_cast<int32_t>(split), /*one_by_one=*/true);
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
  }

  std::string path_;
  TinyModel tiny_;
  std::mt19937 rng_{11};
};

TEST_P(PagedForwardTest, MixedStepsEqualOneRequestAtATime) {
  auto r = runner(4);
  const auto n_vocab = static_cast<size_t>(r->n_vocab());
  const std::vector<size_t> prompt_len = {13, 5, 22, 9};
  constexpr size_t kDecode = 6;
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<float>> want;
  for (size_t len : prompt_len) {
    seqs.push_back(tokens(*r, len + kDecode));
    want.push_back(alone(seqs.back(), len));
  }
  // Steps of at most 16 tokens; prefills chunked by a cycle of sizes, decodes one token a step;
  // sequence 3 arrives at step 2.
  const int32_t chunks[] = {3, 7, 1, 5, 11};
  std::vector<size_t> done(4, 0);
  double worst = 0.0;
  int mixed_steps = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<std::pair<int32_t, size_t>> plan;  // (sequence, tokens this step)
    size_t budget = 16;
    for (int32_t k = 0; k < 4; ++k) {
      const int32_t s = (k + step) % 4;
      if (s == 3 && step < 2) continue;
      const size_t total = seqs[s].size(), len = prompt_len[s];
      if (done[s] == total || budget == 0) continue;
      const size_t want_n =
          done[s] < len ? std::min<size_t>(chunks[(step + s) % 5], len - done[s]) : 1;
      const size_t n = std::min(want_n, budget);
      plan.emplace_back(s, n);
      budget -= n;
    }
    if (plan.empty()) break;
    bool prefill = false, decode = false;
    for (auto [s, n] : plan) (done[s] < prompt_len[s] ? prefill : decode) = true;
    mixed_steps += prefill && decode;
    // Batch order: sequence by sequence, reversed on odd steps, token-interleaved every third.
    if (step % 2 == 1) std::reverse(plan.begin(), plan.end());
    Batch b = r->batch();
    std::vector<std::pair<int32_t, size_t>> rows;  // (sequence, position) of each output row
    std::vector<size_t> taken(plan.size(), 0);
    for (bool more = true; more;) {
      more = false;
      for (size_t p = 0; p < plan.size(); ++p) {
        const auto [s, n] = plan[p];
        const size_t take = step % 3 == 0 ? std::min<size_t>(1, n - taken[p]) : n - taken[p];
        for (size_t t = 0; t < take; ++t, ++taken[p]) {
          const size_t pos = done[s] + taken[p];
          b.add(seqs[s][pos], static_cast<int32_t>(pos), s, true);
          rows.emplace_back(s, pos);
        }
        more = more || taken[p] < n;
      }
    }
    std::vector<float> logits;
    const Status st = r->forward(b, &logits);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(logits.size(), rows.size() * n_vocab);
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto [s, pos] = rows[i];
      worst = std::max(worst, max_abs_diff(logits.data() + i * n_vocab,
                                           want[s].data() + pos * n_vocab, n_vocab));
    }
    for (auto [s, n] : plan) done[s] += n;
  }
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(done[s], seqs[s].size()) << "sequence " << s;
  EXPECT_GE(mixed_steps, 3) << "the schedule should mix prefill chunks with decodes";
  std::printf("%s: mixed steps vs one at a time: max |dlogit| = %.3g\n", GetParam().name, worst);
  EXPECT_LE(worst, GetParam().tolerance);
}

TEST_P(PagedForwardTest, SharedPrefixBlocksEqualSeparateComputation) {
  auto r = runner(2);
  const auto n_vocab = static_cast<size_t>(r->n_vocab());
  const int32_t bs = GetParam().block_size;
  const size_t shared_blocks = bs == 1 ? 9 : 2;
  const size_t shared = shared_blocks * static_cast<size_t>(bs);
  // A: the shared prefix, 3 more prompt tokens, 3 decode tokens. B: the same prefix, then its own.
  std::vector<int32_t> a = tokens(*r, shared + 6);
  std::vector<int32_t> b_toks(a.begin(), a.begin() + static_cast<ptrdiff_t>(shared));
  for (int32_t t : tokens(*r, 7)) b_toks.push_back(t);
  const std::vector<float> want_a = alone(a, shared + 3);
  const std::vector<float> want_b = alone(b_toks, b_toks.size());

  r->feed({a.begin(), a.begin() + static_cast<ptrdiff_t>(shared + 3)}, 0);
  // B's table: A's full prefix blocks, then blocks of its own.
  Batch batch;
  std::vector<int32_t> table_b = r->table(1);
  std::copy_n(r->table(0).begin(), shared_blocks, table_b.begin());
  batch.add_seq(r->table(0));
  batch.add_seq(table_b);
  // One pass: B's whole non-shared part, and A's first decode token.
  for (size_t p = shared; p < b_toks.size(); ++p) {
    batch.add(b_toks[p], static_cast<int32_t>(p), 1, true);
  }
  batch.add(a[shared + 3], static_cast<int32_t>(shared + 3), 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(r->forward(batch, &logits).ok());
  const size_t n_b = b_toks.size() - shared;
  const double d_b = max_abs_diff(logits.data(), want_b.data() + shared * n_vocab, n_b * n_vocab);
  double d_a =
      max_abs_diff(logits.data() + n_b * n_vocab, want_a.data() + (shared + 3) * n_vocab, n_vocab);
  // A's remaining decode steps read the shared blocks again: untouched by B.
  for (size_t p = shared + 4; p < a.size(); ++p) {
    const std::vector<float> step = r->feed({a[p]}, 0, static_cast<int32_t>(p));
    d_a = std::max(d_a, max_abs_diff(step.data(), want_a.data() + p * n_vocab, n_vocab));
  }
  std::printf("%s: shared prefix: B %.3g, A %.3g\n", GetParam().name, d_b, d_a);
  EXPECT_LE(d_b, GetParam().tolerance);
  EXPECT_LE(d_a, GetParam().tolerance);
}

TEST_P(PagedForwardTest, CopiedPartialBlockContinuesLikeTheOriginal) {
  auto r = runner(2);
  const auto n_vocab = static_cast<size_t>(r->n_vocab());
  const int32_t bs = GetParam().block_size;
  const size_t full = bs == 1 ? 7 : 2;
  const size_t len = full * static_cast<size_t>(bs) + (bs == 1 ? 0 : static_cast<size_t>(bs) / 2);
  std::vector<int32_t> prompt = tokens(*r, len);
  const std::vector<int32_t> next = tokens(*r, 2);
  std::vector<int32_t> a = prompt, b = prompt;
  a.push_back(next[0]);
  b.push_back(next[1]);
  const std::vector<float> want_a = alone(a, len), want_b = alone(b, len);

  r->feed(prompt, 0);
  // B shares A's full blocks and gets a private copy of the block A is still filling (for block
  // size 1, of A's last block).
  const size_t last = (len - 1) / static_cast<size_t>(bs);
  std::vector<int32_t> table_b = r->table(1);
  std::copy_n(r->table(0).begin(), last, table_b.begin());
  r->storage().copy_block(r->table(0)[last], table_b[last]);
  Batch batch;
  batch.add_seq(r->table(0));
  batch.add_seq(table_b);
  batch.add(next[1], static_cast<int32_t>(len), 1, true);
  batch.add(next[0], static_cast<int32_t>(len), 0, true);
  std::vector<float> logits;
  ASSERT_TRUE(r->forward(batch, &logits).ok());
  const double d_b = max_abs_diff(logits.data(), want_b.data() + len * n_vocab, n_vocab);
  const double d_a = max_abs_diff(logits.data() + n_vocab, want_a.data() + len * n_vocab, n_vocab);
  EXPECT_LE(d_b, GetParam().tolerance);
  EXPECT_LE(d_a, GetParam().tolerance);
}

INSTANTIATE_TEST_SUITE_P(Cases, PagedForwardTest,
                         ::testing::Values(PagedCase{"tiny_block4_f32", false, 4, DType::kF32},
                                           PagedCase{"tiny_block1_f32", false, 1, DType::kF32},
                                           PagedCase{"tiny_block5_f16", false, 5, DType::kF16},
                                           PagedCase{"stories_block16_f32", true, 16, DType::kF32},
                                           PagedCase{"stories_block16_f16", true, 16, DType::kF16},
                                           PagedCase{"stories_block16_q8_0", true, 16,
                                                     DType::kQ8_0}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace keel::model::testing
