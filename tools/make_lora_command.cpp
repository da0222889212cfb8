// `keel make-lora`: writes a seeded random LoRA adapter for a base model (model/random_lora.h).
#include <cstdio>

#include "commands.h"
#include "core/dtype.h"
#include "model/model.h"
#include "model/random_lora.h"

namespace keel::cli {

int run_make_lora(const MakeLoraOptions& opts) {
  const auto fail = [](const Status& s) {
    std::fprintf(stderr, "keel: %s\n", s.message().c_str());
    return 1;
  };
  Result<std::unique_ptr<model::Model>> base =
      model::Model::open(opts.base_path, {}, gguf::DataMode::kMmap);
  if (!base.ok()) return fail(base.status());
  Result<std::vector<model::LoraTarget>> targets = model::parse_lora_targets(opts.targets);
  if (!targets.ok()) return fail(targets.status());
  model::RandomLoraSpec spec;
  spec.rank = opts.rank;
  spec.targets = *targets;
  spec.dtype = dtype_from_name(opts.type).value_or(DType::kF32);
  spec.seed = opts.seed;
  spec.alpha = opts.alpha;
  if (Status s = model::write_random_lora(spec, **base, opts.output_path); !s.ok()) return fail(s);
  std::printf("wrote %s: rank %lld LoRA (%s) for %s, %s tensors (random, seed %llu)\n",
              opts.output_path.c_str(), static_cast<long long>(opts.rank), opts.targets.c_str(),
              opts.base_path.c_str(), opts.type.c_str(),
              static_cast<unsigned long long>(opts.seed));
  return 0;
}

}  // namespace keel::cli
