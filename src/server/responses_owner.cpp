// responses_owner_id (see responses_owner.h).
#include "server/responses_owner.h"

#include <fmt/format.h>

#include <random>

namespace keel::server {
namespace {

constexpr std::string_view kCollection = "server";
constexpr std::string_view kRecord = "identity";

std::string new_owner_id() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("gw-{:016x}", v);
}

}  // namespace

Result<std::string> responses_owner_id(state::StateStore* own_state) {
  if (own_state == nullptr) return new_owner_id();
  Result<nlohmann::json> rec = own_state->read_record(kCollection, kRecord);
  if (rec.ok() && rec->is_object() && rec->contains("responses_owner") &&
      (*rec)["responses_owner"].is_string()) {
    return (*rec)["responses_owner"].get<std::string>();
  }
  if (!rec.ok() && rec.status().code() != StatusCode::kNotFound &&
      rec.status().code() != StatusCode::kCorrupt) {
    return rec.status();
  }
  const std::string id = new_owner_id();
  KEEL_TRY(own_state->put_record(kCollection, kRecord, {{"responses_owner", id}}));
  return id;
}

}  // namespace keel::server
