// Named LoRA adapters as flags and specs carry them: "NAME=PATH" (keel serve --lora, a TE's
// engine spec, a JE's lora keys). Parsing the pair and loading a list of them into an engine, so
// the three places that start adapters read the pair one way.
//
// Thread safety: pure functions; load_named_loras calls the engine's own thread-safe load_lora.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "engine/engine_client.h"

namespace keel::engine {

struct NamedLora {
  std::string name;
  std::string path;
};

// "NAME=PATH" with both parts non-empty (split at the first '='); InvalidArgument naming the
// text otherwise.
[[nodiscard]] Result<NamedLora> parse_named_lora(std::string_view spec);

// Loads each "NAME=PATH" of `specs` into `eng`, in order, logging each; the first error stops it
// (the parser's, or load_lora's).
[[nodiscard]] Status load_named_loras(EngineClient& eng, const std::vector<std::string>& specs);

}  // namespace keel::engine
