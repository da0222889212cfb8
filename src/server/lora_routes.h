// LoRA adapter routes and model-name resolution, as vLLM serves them:
//   POST /v1/load_lora_adapter    {"lora_name", "lora_path"} → 200 text "Success: ..."
//   POST /v1/unload_lora_adapter  {"lora_name"}              → 200 text "Success: ..."
// Errors (OpenAI envelope): a missing or mistyped field 400; a name already loaded 400; a file
// that is not a valid adapter for the served model 400 (the loader's message); unloading an
// unknown name 404. Both routes exist only with ServerConfig::allow_runtime_lora
// (`--allow-runtime-lora`, vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING): they make the server read
// any path it can, so they are off by default (404 naming the flag).
// A request's `model` selects an adapter by name (lora_for_model); GET /v1/models lists each
// adapter after the base model with `parent` = the served model name and `root` = its path.
//
// Thread safety: stateless functions over a shared ServerContext; the engine's registry locks.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/http_message.h"
#include "server/server_context.h"

namespace keel::server {

inline constexpr std::string_view kLoadLoraPath = "/v1/load_lora_adapter";
inline constexpr std::string_view kUnloadLoraPath = "/v1/unload_lora_adapter";

HttpResponse handle_load_lora(const ServerContext& ctx, const nlohmann::json& body);
HttpResponse handle_unload_lora(const ServerContext& ctx, const nlohmann::json& body);

// True when `model` names a loaded adapter.
[[nodiscard]] bool is_lora_model(const ServerContext& ctx, std::string_view model);
// The engine's adapter name for a request's `model`: "" for the base model (empty or the served
// model name), else `model` itself.
[[nodiscard]] std::string lora_for_model(const ServerContext& ctx, std::string_view model);
// GET /v1/models' objects of the loaded adapters, appended to `list`; `id` non-empty: only that
// one (returns whether it was found).
bool append_lora_models(const ServerContext& ctx, std::string_view id, nlohmann::json* list);

}  // namespace keel::server
