// Engine: a request's LoRA adapter — resolved at submit, and the prefix-cache key it implies.
#include "engine/engine.h"
#include "engine/model_identity.h"

namespace keel::engine {

Result<std::shared_ptr<const model::LoraAdapter>> Engine::resolve_lora(
    const GenerationRequest& request) const {
  if (request.lora.empty()) return std::shared_ptr<const model::LoraAdapter>();
  std::shared_ptr<const model::LoraAdapter> a = loras_.find(request.lora);
  if (a == nullptr) {
    return Status::not_found("no LoRA adapter named '" + request.lora + "' is loaded");
  }
  return a;
}

kv::BlockHash Engine::extra_key(const EngineRequest& a) const {
  const kv::BlockHash root =
      a.lora != nullptr ? lora_prefix_key(model_key_, a.lora->content_digest()) : model_key_;
  if (!a.exit.params.enabled) return kv::request_extra_key(root, a.request.cache_salt);
  // Early exit writes filled (approximate) KV for generated tokens: its blocks never serve a
  // request decoded at full depth.
  return kv::request_extra_key(kv::request_extra_key(root, "keel-early-exit"),
                               a.request.cache_salt);
}

}  // namespace keel::engine
