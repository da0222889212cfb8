// write_lora_adapter (adapter_file.h): the LoraLayout's A and B as .lora_a / .lora_b tensors.
#include "train/adapter_file.h"

#include <cstring>
#include <vector>

#include "gguf/writer.h"

namespace keel::train {

Status write_lora_adapter(const LoraLayout& layout, std::span<const float> params,
                          const model::Model& base, const AdapterProvenance& info,
                          const std::string& path) {
  if (params.size() != layout.num_params) {
    return Status::invalid_argument("the adapter has " + std::to_string(params.size()) +
                                    " parameters, its layout " + std::to_string(layout.num_params));
  }
  KEEL_ASSIGN_OR_RETURN(const std::string arch, base.file().get_string("general.architecture"));
  gguf::GgufWriter w;
  w.set("general.architecture", arch);
  w.set("general.type", std::string("adapter"));
  w.set("general.name", info.name.empty() ? std::string("keel finetune") : info.name);
  w.set("adapter.type", std::string("lora"));
  w.set("adapter.lora.alpha", layout.alpha);
  w.set("keel.finetune.steps", static_cast<uint64_t>(info.steps));
  w.set("keel.finetune.trained_tokens", static_cast<uint64_t>(info.trained_tokens));
  w.set("keel.finetune.train_loss", static_cast<float>(info.train_loss));
  w.set("keel.finetune.seed", info.seed);
  const auto bytes = [&](size_t offset, size_t count) {
    return std::as_bytes(params.subspan(offset, count));
  };
  for (const LoraSlot& s : layout.slots) {
    const std::string name = model::lora_base_tensor_name(s.target, s.layer);
    KEEL_TRY(w.add_tensor(name + ".lora_a", DType::kF32, {s.in, layout.rank},
                          bytes(s.a_offset, static_cast<size_t>(layout.rank * s.in))));
    KEEL_TRY(w.add_tensor(name + ".lora_b", DType::kF32, {layout.rank, s.out},
                          bytes(s.b_offset, static_cast<size_t>(s.out * layout.rank))));
  }
  return w.write(path);
}

}  // namespace keel::train
