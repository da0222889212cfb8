// `keel make-model`: writes a seeded random-weight GGUF in a real model's shape, or with --embed
// the benchmark fixture that embeds a small llama model in that shape's body.
#include <cstdio>
#include <functional>
#include <string>

#include "commands.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "host/progress_reporter.h"
#include "model/embedded_model.h"
#include "model/random_model.h"

namespace keel::cli {
namespace {

using WriteProgress = std::function<void(size_t, size_t)>;
using ModelWriter = std::function<Status(ThreadPool&, const WriteProgress&)>;

// Runs `write` with a pool and a progress line for `path`; false (the error printed) on failure.
bool write_with_progress(const std::string& path, const ModelWriter& write) {
  ThreadPool pool(0);
  host::ProgressReporter progress("writing " + path, "");
  const Status s =
      write(pool, [&progress](size_t done, size_t total) { progress.update(done, total); });
  progress.finish();
  if (!s.ok()) std::fprintf(stderr, "keel: %s\n", s.message().c_str());
  return s.ok();
}

int write_fixture(const MakeModelOptions& opts, const model::ModelShape& shape, DType dtype) {
  if (opts.vocab != "byte" || opts.arch != "llama") {
    std::fprintf(stderr,
                 "keel: --embed keeps the embedded model's llama architecture and "
                 "vocabulary; --arch and --vocab do not apply\n");
    return 1;
  }
  if (!opts.rope_scaling.empty() || opts.rope_scale != 0.0f || opts.rope_orig_ctx != 0) {
    std::fprintf(stderr,
                 "keel: --embed keeps the embedded model's unscaled RoPE; "
                 "--rope-scaling, --rope-scale and --rope-orig-ctx do not apply\n");
    return 1;
  }
  model::EmbedModelSpec spec;
  spec.embed_path = opts.embed;
  spec.shape = shape;
  spec.weight_type = dtype;
  spec.seed = opts.seed;
  spec.n_ctx = opts.ctx;
  if (!write_with_progress(opts.output_path, [&](ThreadPool& pool, const WriteProgress& progress) {
        return model::write_embedded_model(spec, opts.output_path, pool, progress);
      })) {
    return 1;
  }
  std::printf("wrote %s: %s embedded in a %s %s body (a benchmark fixture, not a model)\n",
              opts.output_path.c_str(), opts.embed.c_str(), opts.shape.c_str(), opts.type.c_str());
  return 0;
}

}  // namespace

int run_make_model(const MakeModelOptions& opts) {
  auto shape = model::find_model_shape(opts.shape);
  auto dtype = dtype_from_name(opts.type);
  if (!shape || !dtype) {
    std::fprintf(stderr, "keel: unknown shape '%s' or type '%s'\n", opts.shape.c_str(),
                 opts.type.c_str());
    return 1;
  }
  if (!opts.embed.empty()) return write_fixture(opts, *shape, *dtype);
  model::RandomModelSpec spec;
  spec.arch = shape->arch.empty() ? opts.arch : shape->arch;
  spec.shape = *shape;
  spec.expert_layout = opts.expert_layout == "gate-up"      ? model::ExpertLayout::kGateUp
                       : opts.expert_layout == "per-expert" ? model::ExpertLayout::kPerExpert
                                                            : model::ExpertLayout::kStacked;
  spec.weight_type = *dtype;
  spec.vocab_from = opts.vocab == "byte" ? "" : opts.vocab;
  spec.seed = opts.seed;
  if (opts.ctx > 0) spec.shape.n_ctx = opts.ctx;
  spec.rope_scaling = opts.rope_scaling;
  spec.rope_scale = opts.rope_scale;
  spec.rope_orig_ctx = opts.rope_orig_ctx;
  if (!write_with_progress(opts.output_path, [&](ThreadPool& pool, const WriteProgress& progress) {
        return model::write_random_model(spec, opts.output_path, pool, progress);
      })) {
    return 1;
  }
  std::printf("wrote %s: %s %s, %s weights (random, seed %llu), context %lld%s\n",
              opts.output_path.c_str(), spec.arch.c_str(), opts.shape.c_str(), opts.type.c_str(),
              static_cast<unsigned long long>(opts.seed), static_cast<long long>(spec.shape.n_ctx),
              model::rope_scaling_summary(spec).c_str());
  return 0;
}

}  // namespace keel::cli
