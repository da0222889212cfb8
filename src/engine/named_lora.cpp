// "NAME=PATH" adapters parsed and loaded; see named_lora.h.
#include "engine/named_lora.h"

#include "core/log.h"

namespace keel::engine {

Result<NamedLora> parse_named_lora(std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    return Status::invalid_argument("lora '" + std::string(spec) + "' is not NAME=PATH");
  }
  return NamedLora{std::string(spec.substr(0, eq)), std::string(spec.substr(eq + 1))};
}

Status load_named_loras(EngineClient& eng, const std::vector<std::string>& specs) {
  for (const std::string& spec : specs) {
    KEEL_ASSIGN_OR_RETURN(NamedLora lora, parse_named_lora(spec));
    KEEL_TRY(eng.load_lora(lora.name, lora.path));
    KEEL_LOG_INFO("LoRA adapter '{}' from {}", lora.name, lora.path);
  }
  return {};
}

}  // namespace keel::engine
