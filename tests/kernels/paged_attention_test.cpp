// Ops::paged_attention of every kernel table against the scalar table and against a naive
// double-precision softmax attention over the same stored K/V values (f16 rows widened exactly,
// Q8_0 rows dequantized exactly as dequantize_row):
//   random shapes: head_dim 8 / 20 / 64 / 128, GQA ratios 1 / 2 / 4 / 8, block sizes 1 / 16 / 32,
//   n_kv 1..300 (crossing block boundaries and the kPagedKvChunk split), permuted non-contiguous
//   block tables, f32, f16 and Q8_0 rows (Q8_0: GQA ratios 1 / 4; heads of 8 and 20 values inside
//   and across the 32-value blocks), layer 1 of a 2-layer storage (layer and V offsets);
//   |Δ| ≤ 2e-6·max|v| against the scalar table and the double reference (observed ≤ 2e-7);
// plus one position giving its V row exactly, bit-identical results for 1 and 3 threads and for a
// token alone or inside a batch, and a 1000-position token split into 4 chunks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"

namespace keel::kernels {
namespace {

CpuFeatures attention_features_for(const KernelTable& table, CpuFeatures cpu) {
  if (!table.needs_bf16) cpu.avx512bf16 = false;
  return cpu;
}

// Paged K/V memory laid out as model::KvStorage lays it out: per block, for each of n_layer
// layers, K rows then V rows, [block_size][kv_dim] elements each.
class TestStorage {
 public:
  TestStorage(std::mt19937& rng, int32_t num_blocks, int32_t block_size, int64_t kv_dim,
              DType dtype, int64_t n_layer = 2)
      : num_blocks_(num_blocks),
        block_size_(block_size),
        kv_dim_(kv_dim),
        dtype_(dtype),
        n_layer_(n_layer) {
    row_bytes_ = dtype == DType::kQ8_0
                     ? static_cast<size_t>(kv_dim / 32) * 34
                     : static_cast<size_t>(kv_dim) * (dtype == DType::kF16 ? 2 : 4);
    block_bytes_ = static_cast<size_t>(n_layer * 2 * block_size) * row_bytes_;
    bytes_.resize(block_bytes_ * static_cast<size_t>(num_blocks));
    // Every row from normal floats, stored as quantize_row stores them (f16 rounded, Q8_0
    // quantized); `at` reads back the stored values.
    const size_t n_rows = bytes_.size() / row_bytes_;
    values_.resize(n_rows * static_cast<size_t>(kv_dim));
    for (size_t r = 0; r < n_rows; ++r) {
      const std::vector<float> f = testing::random_floats(rng, kv_dim, 1.0f);
      quantize_row(dtype, f.data(), bytes_.data() + r * row_bytes_, kv_dim);
      dequantize_row(dtype, bytes_.data() + r * row_bytes_, values_.data() + r * kv_dim, kv_dim);
    }
  }

  [[nodiscard]] PagedKv layer(int64_t l) const {
    PagedKv kv;
    kv.base = bytes_.data() + static_cast<size_t>(l * 2 * block_size_) * row_bytes_;
    kv.block_stride = block_bytes_;
    kv.v_offset = static_cast<size_t>(block_size_) * row_bytes_;
    kv.block_size = block_size_;
    kv.kv_dim = kv_dim_;
    kv.dtype = dtype_;
    return kv;
  }
  // Element e of the K (or V) row of position `pos` of a sequence, layer l.
  [[nodiscard]] double at(int64_t l, bool v, const std::vector<int32_t>& table, int32_t pos,
                          int64_t e) const {
    const size_t off =
        static_cast<size_t>(table[static_cast<size_t>(pos / block_size_)]) * block_bytes_ +
        static_cast<size_t>((l * 2 + (v ? 1 : 0)) * block_size_ + pos % block_size_) * row_bytes_;
    return values_[off / row_bytes_ * static_cast<size_t>(kv_dim_) + static_cast<size_t>(e)];
  }
  [[nodiscard]] int32_t num_blocks() const { return num_blocks_; }

 private:
  int32_t num_blocks_, block_size_;
  int64_t kv_dim_;
  DType dtype_;
  int64_t n_layer_;
  size_t row_bytes_ = 0, block_bytes_ = 0;
  std::vector<std::byte> bytes_;
  std::vector<float> values_;  // [rows][kv_dim] the stored values as floats
};

// A batch of query tokens: each with its own n_kv and one of a few sequences' block tables.
struct Queries {
  std::vector<std::vector<int32_t>> tables;  // per sequence
  std::vector<int32_t> seq;                  // [n_q] sequence of each token
  std::vector<int32_t> n_kv;                 // [n_q]
  std::vector<float> q;                      // [n_q][n_heads·head_dim]
  std::vector<const int32_t*> table_ptrs;    // [n_q]

  PagedQueries view(const AttentionHeads& h, float* out) {
    table_ptrs.clear();
    for (int32_t s : seq) table_ptrs.push_back(tables[static_cast<size_t>(s)].data());
    const int64_t row = h.n_heads * h.head_dim;
    return PagedQueries{
        static_cast<int64_t>(n_kv.size()), q.data(), row, n_kv.data(), table_ptrs.data(), out, row};
  }
};

// Naive attention in double of token i (layer l), [n_heads][head_dim].
std::vector<double> reference(const TestStorage& st, int64_t l, const AttentionHeads& h,
                              const Queries& qs, size_t i) {
  const int64_t group = h.n_heads / h.n_kv_heads, dim = h.head_dim;
  const std::vector<int32_t>& table = qs.tables[static_cast<size_t>(qs.seq[i])];
  const int32_t n = qs.n_kv[i];
  std::vector<double> out(static_cast<size_t>(h.n_heads * dim), 0.0);
  for (int64_t hh = 0; hh < h.n_heads; ++hh) {
    const int64_t kvh = hh / group;
    const float* q = qs.q.data() + i * static_cast<size_t>(h.n_heads * dim) + hh * dim;
    std::vector<double> s(static_cast<size_t>(n));
    double mx = -1e300;
    for (int32_t j = 0; j < n; ++j) {
      double dot = 0.0;
      for (int64_t d = 0; d < dim; ++d)
        dot += double{q[d]} * st.at(l, false, table, j, kvh * dim + d);
      s[static_cast<size_t>(j)] = dot * h.scale;
      mx = std::max(mx, s[static_cast<size_t>(j)]);
    }
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int32_t j = 0; j < n; ++j) {
      for (int64_t d = 0; d < dim; ++d) {
        out[static_cast<size_t>(hh * dim + d)] +=
            s[static_cast<size_t>(j)] / sum * st.at(l, true, table, j, kvh * dim + d);
      }
    }
  }
  return out;
}

// Token i of qs computed on its own: a batch of that one token.
std::vector<float> attend_alone(Ops& ops, const PagedKv& kv, const AttentionHeads& h,
                                const Queries& qs, size_t i) {
  const auto row = static_cast<size_t>(h.n_heads * h.head_dim);
  Queries alone;
  alone.tables = qs.tables;
  alone.seq = {qs.seq[i]};
  alone.n_kv = {qs.n_kv[i]};
  alone.q.assign(qs.q.begin() + static_cast<ptrdiff_t>(i * row),
                 qs.q.begin() + static_cast<ptrdiff_t>((i + 1) * row));
  std::vector<float> out(row);
  ops.paged_attention(kv, h, alone.view(h, out.data()));
  return out;
}

class PagedAttentionTest : public ::testing::Test {
 protected:
  // Sequences with permuted block tables over `st`; tokens: a decode token per sequence with a
  // random n_kv, plus a run of consecutive positions (a prefill chunk) of sequence 0.
  Queries random_queries(const TestStorage& st, int32_t block_size, const AttentionHeads& h,
                         int32_t max_kv) {
    Queries qs;
    std::vector<int32_t> ids(static_cast<size_t>(st.num_blocks()));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    const int32_t per_seq = (max_kv + block_size - 1) / block_size;
    const int32_t n_seqs = st.num_blocks() / per_seq;
    for (int32_t s = 0; s < n_seqs; ++s) {
      qs.tables.emplace_back(ids.begin() + s * per_seq, ids.begin() + (s + 1) * per_seq);
    }
    std::uniform_int_distribution<int32_t> len(1, max_kv);
    for (int32_t s = 0; s < n_seqs; ++s) {
      qs.seq.push_back(s);
      qs.n_kv.push_back(len(rng_));
    }
    const int32_t start = len(rng_) - 1;
    for (int32_t p = start; p < std::min(max_kv, start + 5); ++p) {
      qs.seq.push_back(0);
      qs.n_kv.push_back(p + 1);
    }
    qs.q = testing::random_floats(
        rng_, static_cast<int64_t>(qs.seq.size()) * h.n_heads * h.head_dim, 1.0f);
    return qs;
  }

  CpuFeatures cpu_ = detect_cpu_features();
  ThreadPool pool_{2};
  Ops scalar_{Isa::kScalar, &pool_, cpu_};
  std::mt19937 rng_{23};
};

TEST_F(PagedAttentionTest, EveryTableMatchesScalarAndDoubleReference) {
  const std::vector<const KernelTable*> tables = testing::runnable_tables(cpu_);
  double worst_scalar = 0.0, worst_ref = 0.0;
  int cases = 0;
  for (int64_t head_dim : {8, 20, 64, 128}) {
    for (int64_t ratio : {1, 2, 4, 8}) {
      for (int32_t block_size : {1, 16, 32}) {
        for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0}) {
          if (dtype == DType::kQ8_0 && (ratio == 2 || ratio == 8)) continue;  // test time
          // Q8_0 rows need kv_dim % 32 == 0: head_dim 8 and 20 get 4 and 8 KV heads, so heads
          // share Q8_0 blocks and (20) start inside one.
          const int64_t n_kv_heads =
              dtype == DType::kQ8_0
                  ? std::max<int64_t>(ratio == 8 ? 1 : 2, 32 / std::gcd(head_dim, int64_t{32}))
              : ratio == 8 ? 1
                           : 2;
          const AttentionHeads h{n_kv_heads * ratio, n_kv_heads, head_dim,
                                 1.0f / std::sqrt(static_cast<float>(head_dim))};
          const int32_t max_kv = 300;
          const int32_t per_seq = (max_kv + block_size - 1) / block_size;
          TestStorage st(rng_, per_seq * 3 + 1, block_size, n_kv_heads * head_dim, dtype);
          Queries qs = random_queries(st, block_size, h, max_kv);
          const size_t row = static_cast<size_t>(h.n_heads * head_dim);
          const size_t n_q = qs.seq.size();
          const PagedKv kv = st.layer(1);
          std::vector<float> ref_out(n_q * row);
          scalar_.paged_attention(kv, h, qs.view(h, ref_out.data()));
          double vmax = 0.0;
          std::vector<std::vector<double>> exact(n_q);
          for (size_t i = 0; i < n_q; ++i) {
            exact[i] = reference(st, 1, h, qs, i);
            for (int32_t j = 0; j < qs.n_kv[i]; ++j) {
              for (int64_t e = 0; e < n_kv_heads * head_dim; ++e) {
                vmax = std::max(vmax, std::fabs(st.at(1, true, qs.tables[qs.seq[i]], j, e)));
              }
            }
          }
          for (const KernelTable* t : tables) {
            Ops ops(t->isa, &pool_, attention_features_for(*t, cpu_));
            std::vector<float> got(n_q * row, -7.0f);
            ops.paged_attention(kv, h, qs.view(h, got.data()));
            for (size_t i = 0; i < n_q; ++i) {
              for (size_t e = 0; e < row; ++e) {
                const double ds = std::fabs(double{got[i * row + e]} - ref_out[i * row + e]);
                const double dr = std::fabs(double{got[i * row + e]} - exact[i][e]);
                worst_scalar = std::max(worst_scalar, ds / vmax);
                worst_ref = std::max(worst_ref, dr / vmax);
                ASSERT_LE(ds, 2e-6 * vmax)
                    << t->name << " head_dim " << head_dim << " ratio " << ratio << " block "
                    << block_size << " " << dtype_name(dtype) << " token " << i << " n_kv "
                    << qs.n_kv[i] << " elem " << e;
                ASSERT_LE(dr, 2e-6 * vmax)
                    << t->name << " head_dim " << head_dim << " ratio " << ratio << " block "
                    << block_size << " " << dtype_name(dtype) << " token " << i << " n_kv "
                    << qs.n_kv[i] << " elem " << e;
              }
            }
            ++cases;
          }
        }
      }
    }
  }
  std::printf("paged attention, %d cases: max |d|/max|v| = %.3g vs scalar, %.3g vs double\n", cases,
              worst_scalar, worst_ref);
}

TEST_F(PagedAttentionTest, OnePositionGivesItsValueRow) {
  for (const KernelTable* t : testing::runnable_tables(cpu_)) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0}) {
      Ops ops(t->isa, &pool_, attention_features_for(*t, cpu_));
      const AttentionHeads h{8, 2, 64, 0.125f};
      TestStorage st(rng_, 4, 16, 128, dtype);
      Queries qs;
      qs.tables = {{2, 0}};
      qs.seq = {0};
      qs.n_kv = {1};
      qs.q = testing::random_floats(rng_, 8 * 64, 1.0f);
      std::vector<float> out(8 * 64);
      ops.paged_attention(st.layer(1), h, qs.view(h, out.data()));
      for (int64_t hh = 0; hh < 8; ++hh) {
        for (int64_t d = 0; d < 64; ++d) {
          EXPECT_FLOAT_EQ(out[static_cast<size_t>(hh * 64 + d)],
                          static_cast<float>(st.at(1, true, qs.tables[0], 0, (hh / 4) * 64 + d)))
              << t->name;
        }
      }
    }
  }
}

// Results depend only on a token's own inputs: equal bits for 1 or 3 threads, and for a token
// alone or inside a batch; a long token (4 chunks of kPagedKvChunk) agrees with the reference.
TEST_F(PagedAttentionTest, ThreadAndBatchInvariantAndLongContexts) {
  const AttentionHeads h{8, 2, 64, 0.125f};
  const int32_t block_size = 16, max_kv = 4 * kPagedKvChunk - 24;
  const int32_t per_seq = (max_kv + block_size - 1) / block_size;
  TestStorage st(rng_, per_seq * 3, block_size, 128, DType::kF16);
  for (const KernelTable* t : testing::runnable_tables(cpu_)) {
    Queries qs = random_queries(st, block_size, h, max_kv);
    qs.n_kv[0] = max_kv;
    const size_t row = 8 * 64, n_q = qs.seq.size();
    ThreadPool one(1), three(3);
    Ops ops1(t->isa, &one, attention_features_for(*t, cpu_)),
        ops3(t->isa, &three, attention_features_for(*t, cpu_));
    std::vector<float> a(n_q * row), b(n_q * row);
    ops1.paged_attention(st.layer(0), h, qs.view(h, a.data()));
    ops3.paged_attention(st.layer(0), h, qs.view(h, b.data()));
    EXPECT_EQ(a, b) << t->name;
    for (size_t i = 0; i < n_q; ++i) {
      const std::vector<float> c = attend_alone(ops3, st.layer(0), h, qs, i);
      EXPECT_TRUE(std::equal(c.begin(), c.end(), a.begin() + static_cast<ptrdiff_t>(i * row)))
          << t->name << " token " << i;
    }
    const std::vector<double> exact = reference(st, 0, h, qs, 0);
    for (size_t e = 0; e < row; ++e) ASSERT_NEAR(a[e], exact[e], 1e-4) << t->name << " " << e;
  }
}

// A prefill: 40 consecutive tokens of one sequence (tiles of kQueryTile, the last one short)
// crossing chunk boundaries, plus a run whose n_kv go down; 16 query heads per KV head (more rows
// than one pass of the AVX-512 kernel) and a head_dim that is not a multiple of 16. Each token's
// bits equal those it gets alone (one token, split into chunks), and the double reference holds.
TEST_F(PagedAttentionTest, PrefillTilesEqualTokensAlone) {
  const AttentionHeads h{32, 2, 80, 1.0f / std::sqrt(80.0f)};
  const int32_t block_size = 16, max_kv = 2 * kPagedKvChunk + 100;
  const int32_t per_seq = (max_kv + block_size - 1) / block_size;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    TestStorage st(rng_, per_seq * 2, block_size, 2 * 80, dtype);
    for (const KernelTable* t : testing::runnable_tables(cpu_)) {
      Queries qs = random_queries(st, block_size, h, max_kv);
      qs.seq.clear();
      qs.n_kv.clear();
      for (int32_t p = kPagedKvChunk - 20; p < kPagedKvChunk + 20; ++p) {
        qs.seq.push_back(0);
        qs.n_kv.push_back(p + 1);
      }
      for (int32_t n : {max_kv, 3, 2 * kPagedKvChunk, 1}) {
        qs.seq.push_back(1);
        qs.n_kv.push_back(n);
      }
      const size_t row = 32 * 80, n_q = qs.seq.size();
      qs.q = testing::random_floats(rng_, static_cast<int64_t>(n_q * row), 1.0f);
      Ops ops(t->isa, &pool_, attention_features_for(*t, cpu_));
      std::vector<float> all(n_q * row);
      ops.paged_attention(st.layer(0), h, qs.view(h, all.data()));
      for (size_t i = 0; i < n_q; ++i) {
        const std::vector<float> c = attend_alone(ops, st.layer(0), h, qs, i);
        ASSERT_TRUE(std::equal(c.begin(), c.end(), all.begin() + static_cast<ptrdiff_t>(i * row)))
            << t->name << " " << dtype_name(dtype) << " token " << i;
        if (i % 7 != 0 && i < 40) continue;  // the double reference on a sample (test time)
        const std::vector<double> exact = reference(st, 0, h, qs, i);
        for (size_t e = 0; e < row; ++e) {
          ASSERT_NEAR(all[i * row + e], exact[e], 2e-5)
              << t->name << " " << dtype_name(dtype) << " token " << i << " " << e;
        }
      }
    }
  }
}

// Context-parallel decode: a sequence's positions split into shards along block boundaries (one
// not on a chunk boundary), each shard attended alone with state outputs as a member holding only
// its blocks would (its part of the block table, positions from 0), and the parts merged by
// merge_attention_parts, give the whole attention within rounding; one shard alone gives
// paged_attention's output bit for bit. Decode tokens (split into chunks) and a 3-token tile.
TEST_F(PagedAttentionTest, ShardedPartsMergeToTheWholeAttention) {
  const AttentionHeads h{8, 2, 64, 1.0f / std::sqrt(64.0f)};
  const int32_t block_size = 16, n = 700;
  const int32_t blocks = (n + block_size - 1) / block_size;
  const std::vector<int32_t> cuts = {0, 160, 432, n};  // 160 = 10 blocks, not a chunk boundary
  const size_t row = 8 * 64;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kQ8_0}) {
    TestStorage st(rng_, blocks, block_size, 2 * 64, dtype);
    for (const KernelTable* t : testing::runnable_tables(cpu_)) {
      Ops ops(t->isa, &pool_, attention_features_for(*t, cpu_));
      Queries whole;
      whole.tables = {std::vector<int32_t>(static_cast<size_t>(blocks))};
      std::iota(whole.tables[0].begin(), whole.tables[0].end(), 0);
      whole.tables.push_back(whole.tables[0]);  // a second table: token 0 is not in the tile
      whole.seq = {1, 0, 0, 0};
      whole.n_kv = {n, n, n, n};  // a decode token (split into chunks) and a 3-token tile
      whole.q = testing::random_floats(rng_, static_cast<int64_t>(4 * row), 1.0f);
      std::vector<float> expected(4 * row);
      ops.paged_attention(st.layer(0), h, whole.view(h, expected.data()));
      // Each shard: its blocks, its positions from 0, the same queries (all see every position).
      std::vector<std::vector<float>> acc, m, l;
      for (size_t s = 0; s + 1 < cuts.size(); ++s) {
        Queries part = whole;
        part.tables = {std::vector<int32_t>(whole.tables[0].begin() + cuts[s] / block_size,
                                            whole.tables[0].end())};
        part.tables.push_back(part.tables[0]);
        const int32_t len = cuts[s + 1] - cuts[s];
        part.n_kv = {len, len, len, len};
        acc.emplace_back(4 * row);
        m.emplace_back(4 * 8);
        l.emplace_back(4 * 8);
        PagedQueries v = part.view(h, acc.back().data());
        v.state_m = m.back().data();
        v.state_l = l.back().data();
        ops.paged_attention(st.layer(0), h, v);
        if (s == 0) {  // one part alone: merged, it is a whole attention over its positions
          Queries alone = part;
          std::vector<float> plain(4 * row), merged(64);
          ops.paged_attention(st.layer(0), h, alone.view(h, plain.data()));
          for (size_t r = 0; r < 4 * 8; ++r) {
            const float* a = acc.back().data() + r * 64;
            merge_attention_parts({&a, 1}, {&m.back()[r], 1}, {&l.back()[r], 1}, 64, merged.data());
            ASSERT_TRUE(std::equal(merged.begin(), merged.end(), plain.begin() + r * 64))
                << t->name << " " << dtype_name(dtype) << " row " << r;
          }
        }
      }
      double max_v = 0, worst = 0;
      for (float x : expected) max_v = std::max(max_v, double{std::fabs(x)});
      for (size_t r = 0; r < 4 * 8; ++r) {
        std::vector<const float*> parts;
        std::vector<float> pm, pl;
        for (size_t s = 0; s < acc.size(); ++s) {
          parts.push_back(acc[s].data() + r * 64);
          pm.push_back(m[s][r]);
          pl.push_back(l[s][r]);
        }
        std::vector<float> merged(64);
        merge_attention_parts(parts, pm, pl, 64, merged.data());
        for (size_t d = 0; d < 64; ++d) {
          worst = std::max(worst, double{std::fabs(merged[d] - expected[r * 64 + d])});
        }
      }
      EXPECT_LE(worst, 2e-6 * max_v) << t->name << " " << dtype_name(dtype);
    }
  }
}

// Context-parallel prefill: 384 positions in 4 chunks of 96 held zig-zag by two members (member 0
// chunks 0 and 3, member 1 chunks 1 and 2). Every token's causal attention is the merge, in
// position order, of its parts over the chunks at or before it (the chunk holding it with a
// per-token n_kv, as a ring pass computes them with only the state outputs), within rounding of
// one process's prefill. f16 KV, every table.
TEST_F(PagedAttentionTest, ZigZagRingPrefillPartsMergeToCausalAttention) {
  const AttentionHeads h{8, 2, 64, 1.0f / std::sqrt(64.0f)};
  const int32_t block_size = 16, n = 384, chunk = 96, n_chunks = n / chunk;
  const size_t row = 8 * 64;
  TestStorage st(rng_, n / block_size, block_size, 2 * 64, DType::kF16);
  for (const KernelTable* t : testing::runnable_tables(cpu_)) {
    Ops ops(t->isa, &pool_, attention_features_for(*t, cpu_));
    Queries whole;
    whole.tables = {std::vector<int32_t>(static_cast<size_t>(n / block_size))};
    std::iota(whole.tables[0].begin(), whole.tables[0].end(), 0);
    for (int32_t i = 0; i < n; ++i) {
      whole.seq.push_back(0);
      whole.n_kv.push_back(i + 1);
    }
    whole.q = testing::random_floats(rng_, static_cast<int64_t>(n * row), 1.0f);
    std::vector<float> expected(n * row);
    ops.paged_attention(st.layer(0), h, whole.view(h, expected.data()));
    // parts[c]: every token at or after chunk c's start against chunk c's positions — what the
    // member holding chunk c computes for the query chunks the ring brings it.
    std::vector<std::vector<float>> acc(n_chunks), m(n_chunks), l(n_chunks);
    for (int32_t c = 0; c < n_chunks; ++c) {
      Queries part;
      part.tables = {std::vector<int32_t>(whole.tables[0].begin() + c * chunk / block_size,
                                          whole.tables[0].end())};
      for (int32_t i = c * chunk; i < n; ++i) {
        part.seq.push_back(0);
        part.n_kv.push_back(std::min(chunk, i + 1 - c * chunk));
      }
      part.q.assign(whole.q.begin() + static_cast<ptrdiff_t>(c * chunk * row), whole.q.end());
      const size_t n_q = part.seq.size();
      acc[c].assign(n_q * row, 0.0f);
      m[c].assign(n_q * 8, 0.0f);
      l[c].assign(n_q * 8, 0.0f);
      PagedQueries v = part.view(h, acc[c].data());
      v.state_m = m[c].data();
      v.state_l = l[c].data();
      ops.paged_attention(st.layer(0), h, v);
    }
    double max_v = 0, worst = 0;
    for (float x : expected) max_v = std::max(max_v, double{std::fabs(x)});
    for (int32_t i = 0; i < n; ++i) {
      for (int64_t hh = 0; hh < 8; ++hh) {
        std::vector<const float*> parts;
        std::vector<float> pm, pl;
        for (int32_t c = 0; c * chunk <= i; ++c) {
          const size_t at = static_cast<size_t>(i - c * chunk);
          parts.push_back(acc[c].data() + at * row + hh * 64);
          pm.push_back(m[c][at * 8 + hh]);
          pl.push_back(l[c][at * 8 + hh]);
        }
        std::vector<float> merged(64);
        merge_attention_parts(parts, pm, pl, 64, merged.data());
        for (size_t d = 0; d < 64; ++d) {
          const double e = expected[static_cast<size_t>(i) * row + hh * 64 + d];
          worst = std::max(worst, std::fabs(merged[d] - e));
        }
      }
    }
    EXPECT_LE(worst, 2e-6 * max_v) << t->name;
  }
}

}  // namespace
}  // namespace keel::kernels
