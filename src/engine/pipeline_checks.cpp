// The refusals of a pipeline-parallel engine (see pipeline_checks.h for why each).
#include "engine/pipeline_checks.h"

#include <string>

namespace keel::engine {
namespace {

Status refuse(const std::string& what) {
  return Status::invalid_argument(what + " is not supported with pipeline parallelism (--pp)");
}

}  // namespace

Status check_pipeline_config(const EngineConfig& config) {
  if (config.kv_host_bytes > 0 || !config.kv_disk_dir.empty()) {
    return refuse("a KV tier (--kv-host-bytes, --kv-disk-dir)");
  }
  if (config.semi_pd.has_value()) return refuse("--mode semi-pd");
  if (config.speculative.enabled()) return refuse("--speculative");
  if (config.early_exit.enabled) return refuse("--early-exit");
  if (config.sparse.policy != "dense") return refuse("--sparse-policy " + config.sparse.policy);
  return Status();
}

Status check_pipeline_request(const GenerationRequest& request, const EngineConfig& config) {
  if (!request.lora.empty()) return refuse("a LoRA adapter (lora)");
  if (!request.pic_chunks.empty()) return refuse("position-independent chunks (pic)");
  if (request.sparse.value_or(config.sparse).policy != "dense") return refuse("sparse decode");
  if (request.speculative.value_or(config.speculative).enabled()) {
    return refuse("speculative decoding");
  }
  if (request.early_exit.value_or(config.early_exit).enabled) return refuse("early exit");
  return Status();
}

}  // namespace keel::engine
