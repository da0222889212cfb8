// The kernel interface used by the model: a weight-matrix view, the instruction-set tiers, and
// Ops — the per-engine bundle of the dispatch table chosen once at start-up, the thread pool and
// scratch memory. Every op has a scalar reference; SIMD variants must agree with it (tested).
//
// Numerics of matmul per weight type (identical in every tier up to float summation order):
//   F32        f32 activations, f32 accumulation.
//   F16, BF16  activations rounded to the weight's 16-bit type first (as llama.cpp does), exact
//              products accumulated in f32 (AVX512-BF16 uses vdpbf16ps).
//   Q8_0, Q4_0 activations quantized once per call to 8 bits per 32 elements (ggml's Q8_0, scale
//              rounded to fp16); exact integer block dots, scaled and summed in f32.
//   Q4_K, Q5_K, Q6_K  the same with ggml's Q8_K activations (256 elements, f32 scale, bsums).
//
// Thread safety: an Ops object belongs to one thread (the engine thread); its methods use the
// pool internally. The free functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/result.h"
#include "core/thread_pool.h"

namespace keel::kernels {

// How a weight matrix's bytes are ordered.
enum class WeightLayout : uint8_t {
  kRows,       // GGUF's row-major order: row r at data + r·row_bytes
  kGrouped16,  // groups of 16 rows interleaved block by block (weight_layout.h; quantized types)
};

// A weight matrix: `rows` rows of `cols` elements, each row `row_bytes` bytes of `dtype` blocks,
// in `layout` order (as stored in GGUF unless rewritten at load). (GGUF shape: ne0 = cols,
// ne1 = rows.)
struct Matrix {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const std::byte* data = nullptr;
  size_t row_bytes = 0;
  WeightLayout layout = WeightLayout::kRows;
};

// Instruction-set tiers, lowest first. A tier is usable when the CPU has all its features:
//   kAvx2:   AVX2 + FMA + F16C
//   kAvx512: AVX-512 F/BW/VL/DQ + VNNI (BF16 used when present)
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);  // "scalar", "avx2", "avx512"
bool isa_supported(Isa isa, const CpuFeatures& cpu);
Isa best_isa(const CpuFeatures& cpu);

// The tier to run: `forced` ("scalar", "avx2", "avx512"; e.g. from a CLI flag) when given and
// non-empty, else best_isa(cpu). InvalidArgument for an unknown name, Unsupported when this CPU
// lacks the forced tier (the message names the missing features).
Result<Isa> choose_isa(const CpuFeatures& cpu, std::optional<std::string_view> forced);
// choose_isa() with the KEEL_ISA environment variable as `forced` (unset or empty: the best).
Result<Isa> choose_isa_from_env(const CpuFeatures& cpu);

// Weight types matmul() and dequantize_row() accept.
bool matmul_supports(DType dtype);

// Converts n elements of one row (n a multiple of the block size) to float. Scalar reference;
// bit-exact with ggml's dequantize_row_* functions. Accepts every matmul_supports() type.
void dequantize_row(DType dtype, const std::byte* src, float* dst, int64_t n);

// Weight types quantize_row() accepts: F32, F16, BF16, Q8_0, Q4_0, Q4_K.
bool quantize_supports(DType dtype);
// Converts n floats (a multiple of the block size) to one row of `dtype`
// (dtype_row_bytes(dtype, n) bytes), bit-exact with ggml's reference quantizers
// (quantize_row_q8_0_ref, quantize_row_q4_0_ref, round-to-nearest-even f16/bf16). Q4_K is a
// simple min–max quantizer (valid blocks, not llama-quantize's search; see quantize.cpp).
void quantize_row(DType dtype, const float* src, std::byte* dst, int64_t n);

// Pair i at position p turns by θ = freq_scale·θx, θx = p·freq_base^(-2i/n_rot) / freq_factors[i];
// YaRN (ext_factor ≠ 0) mixes in θx by ramp(i)·ext_factor, ramp 1 for i ≤ yarn_low falling to 0
// at yarn_high (kernels/rope.h, llama.cpp's rope_yarn). cos and sin are multiplied by mscale.
struct RopeParams {
  int64_t n_rot = 0;  // rotated dimensions per head (≤ head_dim, even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / scaling factor (linear or YaRN)
  bool neox = false;        // false: rotate pairs (2i, 2i+1); true: pairs (i, i + n_rot/2)
  const float* freq_factors = nullptr;      // optional [n_rot/2] divisors (llama3 rope_freqs)
  float ext_factor = 0.0f;                  // YaRN extrapolation mix (0: none)
  float yarn_low = 0.0f, yarn_high = 0.0f;  // YaRN ramp ends (pair indices)
  float mscale = 1.0f;                      // magnitude of cos/sin (YaRN's attention scaling)
};

// One layer's view of paged KV storage: memory in blocks of `block_size` positions. Block b holds
// this layer's K rows at base + b*block_stride + p*row_bytes (p in [0, block_size), row_bytes =
// kv_dim * element size) and its V rows `v_offset` bytes after its K rows. A row is
// [n_kv_heads][head_dim] elements of `dtype`.
struct PagedKv {
  const std::byte* base = nullptr;  // block 0's K rows of this layer
  size_t block_stride = 0;          // bytes between consecutive blocks
  size_t v_offset = 0;              // bytes from a block's K rows to its V rows
  int32_t block_size = 0;           // positions per block (≥ 1)
  int64_t kv_dim = 0;               // elements per row: n_kv_heads * head_dim
  DType dtype = DType::kF32;        // kF32, kF16 or kQ8_0 (kv_dim % 32 == 0; blocks of 32 values
                                    // along the row, so a head may share a block's scale)
};

// The head layout of an attention call.
struct AttentionHeads {
  int64_t n_heads = 0;     // query heads
  int64_t n_kv_heads = 0;  // KV heads; n_heads is a multiple
  int64_t head_dim = 0;    // elements per head
  float scale = 0.0f;      // score = scale * q·k (usually 1 / sqrt(head_dim))
};

// The query tokens of one paged_attention call. Token i's query row is q + i*q_stride and its
// output row out + i*out_stride, both [n_heads][head_dim] floats; it attends to positions
// [0, n_kv[i]) (n_kv[i] ≥ 1) of the sequence whose block ids are block_tables[i] (position p lives
// in block block_tables[i][p / block_size]; tokens of one sequence may share one table). The
// caller guarantees every block id is in range and those positions hold K/V.
struct PagedQueries {
  int64_t n_q = 0;
  const float* q = nullptr;
  int64_t q_stride = 0;                          // floats
  const int32_t* n_kv = nullptr;                 // [n_q]
  const int32_t* const* block_tables = nullptr;  // [n_q]
  float* out = nullptr;
  int64_t out_stride = 0;  // floats
  // Partial results (context-parallel decode: each member attends over its shard of the
  // positions): when set ([n_q][n_heads] each), every output row is left unnormalised — the
  // softmax-weighted sum before dividing by the sum of weights — and its running max and sum of
  // exp(score - max) go here, for merge_attention_parts.
  float* state_m = nullptr;
  float* state_l = nullptr;
};

// Folds the partial results of one query row over disjoint ranges of its positions, given in
// position order (each an unnormalised row `acc[p]` [dim] with its max `m[p]` and sum `l[p]`, as
// paged_attention leaves them with state outputs), into `out` [dim], normalised: the log-sum-exp
// merge of context-parallel decode. A part with l = 0 (no positions) is skipped; at least one
// part must have positions. One part gives paged_attention's own output bit for bit.
void merge_attention_parts(std::span<const float* const> acc, std::span<const float> m,
                           std::span<const float> l, int64_t dim, float* out);

// Positions per paged-attention work unit: a token attending to more positions is split into
// chunks computed in parallel and merged (flash-decoding), so one long sequence keeps every
// thread busy.
inline constexpr int32_t kPagedKvChunk = 256;

struct KernelTable;  // the dispatch table (internal; see dispatch.h)
struct MatmulTask;   // one matmul call as the kernels see it (internal; see dispatch.h)

class Ops {
 public:
  // `pool` must outlive the Ops. Aborts if `cpu` lacks the tier (check isa_supported() first).
  // The AVX-512 tier uses AVX512-BF16 kernels when `cpu` has the extension.
  Ops(Isa isa, ThreadPool* pool, const CpuFeatures& cpu);
  // As above with detect_cpu_features().
  Ops(Isa isa, ThreadPool* pool);
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;
  ~Ops();

  [[nodiscard]] Isa isa() const { return isa_; }
  [[nodiscard]] ThreadPool& pool() { return *pool_; }
  // The dispatch table in use: "scalar", "avx2", "avx512" or "avx512-bf16".
  [[nodiscard]] std::string_view kernel_name() const;

  // y[t][r] = Σ_k w[r][k] · x[t][k]   x: [n_tokens][w.cols]   y: [n_tokens][w.rows]
  // Quantized weights may quantize x internally (as llama.cpp does); rows split across threads.
  void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y);
  // Up to kMaxMatmulMany matmuls over the same activations (equal cols): ys[i] = ws[i] · x, each
  // exactly what matmul(ws[i], x, n_tokens, ys[i]) writes. When the weight types share an
  // activation format (F16; BF16; Q8_0 and Q4_0; Q4_K, Q5_K and Q6_K; F32) x is prepared once
  // and all rows run in one pool job (the fused QKV and gate/up projections, or gate and up of
  // all 8 experts an MoE token chose); otherwise the matrices run one after another.
  static constexpr size_t kMaxMatmulMany = 16;
  void matmul_many(std::span<const Matrix> ws, const float* x, int64_t n_tokens,
                   std::span<float* const> ys);
  // matmul_many over rms_norm(x) (rows of ws[0].cols scaled by norm_weight, as rms_norm() does):
  // each token's normalised row is computed while the activations are prepared and never written
  // out. Equals rms_norm() into a buffer followed by matmul_many(), bit for bit.
  void rms_norm_matmul_many(std::span<const Matrix> ws, const float* x, const float* norm_weight,
                            float eps, int64_t n_tokens, std::span<float* const> ys);
  // matmul over silu(gate)·up (both [n_tokens][w.cols]), fused the same way. Equals silu_mul()
  // into a buffer followed by matmul() when w.cols is a multiple of the SIMD width (16).
  void silu_mul_matmul(const Matrix& w, const float* gate, const float* up, int64_t n_tokens,
                       float* y);
  // Up to kMaxMatmulMany silu_mul_matmuls (equal cols), each over its own input:
  // ys[i] = ws[i] · (silu(gate[i])·up[i]) with gate[i], up[i]: [n_tokens][cols], each exactly what
  // silu_mul_matmul(ws[i], gate[i], up[i], n_tokens, ys[i]) writes. Each matrix's activations are
  // prepared into its own part of the scratch (a single token's on the calling thread, several
  // tokens' in one pool job); when the weight types share an activation format all rows then run
  // in one pool job (an MoE decode step's down projections), otherwise one matrix after another.
  void silu_mul_matmul_many(std::span<const Matrix> ws, std::span<const float* const> gate,
                            std::span<const float* const> up, int64_t n_tokens,
                            std::span<float* const> ys);

  // out[t] = x[t] / rms(x[t]) * weight   (rows of `dim`; out may alias x)
  void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
                float* out);
  // Rotates, in place, the first n_rot dims of each of n_heads heads of each token. Uses neither
  // the pool nor the scratch: may run concurrently on one Ops (e.g. inside pool jobs).
  // x: [n_tokens][row_stride] with head h at x[t*row_stride + h*head_dim]; positions: [n_tokens]
  void rope(const RopeParams& p, const int32_t* positions, int64_t n_tokens, int64_t n_heads,
            int64_t head_dim, int64_t row_stride, float* x);
  // out[i] = silu(gate[i]) * up[i]   (out may alias gate)
  void silu_mul(const float* gate, const float* up, int64_t n, float* out);
  // y[i] += x[i]
  void add(const float* x, int64_t n, float* y);

  // Causal attention of a batch of query tokens over paged KV storage (see PagedKv), reading
  // K/V rows in place through each token's block table. Token i attends to positions
  // [0, queries.n_kv[i]) of its sequence; query head h uses KV head h / (n_heads / n_kv_heads), and
  // all query heads of one KV head are computed together (each K/V row is read once per group);
  // consecutive tokens sharing a block table (a prefill) are computed in tiles of up to 32 tokens
  // (each K/V row read once per tile on AVX-512). Softmax is online (running max and sum), so any
  // n_kv works in fixed memory. Work is split across the pool by (tile, KV head), and a single
  // token by chunks of kPagedKvChunk positions; the result of a token depends only on its own
  // inputs, not on the batch, its tile or the thread count.
  // Uses the pool and the scratch: call from the Ops owner thread only.
  void paged_attention(const PagedKv& kv, const AttentionHeads& heads, const PagedQueries& queries);

 private:
  struct RowSource;  // where a matmul's input rows come from (ops_matmul.cpp)
  void prepare_activations(DType dtype, std::span<const RowSource> srcs, int64_t n_tokens,
                           int64_t cols, MatmulTask* tasks);
  void run_matmuls(std::span<const Matrix> ws, std::span<const RowSource> srcs, int64_t n_tokens,
                   std::span<float* const> ys);

  Isa isa_;
  ThreadPool* pool_;
  const KernelTable* table_;
  struct Scratch;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace keel::kernels
