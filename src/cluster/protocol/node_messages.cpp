// The node agent's message codecs; see node_messages.h.
#include "cluster/protocol/node_messages.h"

#include "cluster/protocol/messages.h"

namespace keel::cluster {
namespace {

Status bad(std::string_view message, std::string_view field, std::string_view why) {
  return Status::invalid_argument(std::string(message) + ": '" + std::string(field) + "' " +
                                  std::string(why));
}

Status read_str(const Json& body, std::string_view message, const char* field, std::string* out,
                bool required) {
  const auto it = body.find(field);
  if (it == body.end()) return required ? bad(message, field, "missing") : Status();
  if (!it->is_string()) return bad(message, field, "is not a string");
  *out = it->get<std::string>();
  return {};
}

Status read_int(const Json& body, std::string_view message, const char* field, int64_t lo,
                int64_t hi, int32_t* out) {
  const auto it = body.find(field);
  if (it == body.end()) return {};  // the default stands
  if (!it->is_number_integer()) return bad(message, field, "is not an integer");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return bad(message, field, "out of range");
  *out = static_cast<int32_t>(v);
  return {};
}

// An election and its fencing token: absent = "" and 0 (a sender outside any election), else a
// string and a non-negative integer.
Status read_fence(const Json& body, std::string_view message, std::string* election, int64_t* out) {
  KEEL_TRY(read_str(body, message, "election", election, false));
  const auto it = body.find("fence");
  if (it == body.end()) return {};
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return bad(message, "fence", "is not a fencing token");
  }
  *out = it->get<int64_t>();
  return {};
}

}  // namespace

net::Message encode(const StartTe& m) {
  return {std::string(msg::kStartTe), Json{{"id", m.id},
                                           {"model_path", m.model_path},
                                           {"served_model_name", m.served_model_name},
                                           {"role", m.role},
                                           {"threads", m.threads},
                                           {"isa", m.isa},
                                           {"engine", encode_te_engine_spec(m.engine)},
                                           {"instance", m.instance},
                                           {"priority", m.priority},
                                           {"memory_bytes", m.memory_bytes},
                                           {"election", m.election},
                                           {"fence", m.fence}}};
}

net::Message encode(const StopTe& m) {
  return {
      std::string(msg::kStopTe),
      Json{{"id", m.id}, {"grace_ms", m.grace_ms}, {"election", m.election}, {"fence", m.fence}}};
}

net::Message encode(const Fence& m) {
  return {std::string(msg::kFence), Json{{"election", m.election}, {"fence", m.fence}}};
}

Json encode_body(const StartTeReply& m) {
  Json body = status_body(m.status);
  body["id"] = m.id;
  body["address"] = m.address;
  body["pid"] = m.pid;
  body["warm"] = m.warm;
  return body;
}

Result<StartTe> decode_start_te(const Json& body) {
  constexpr std::string_view kMsg = "start_te";
  if (!body.is_object()) return Status::invalid_argument("start_te: body is not a map");
  StartTe m;
  KEEL_TRY(read_str(body, kMsg, "id", &m.id, true));
  if (m.id.empty() || m.id.find('/') != std::string::npos) return bad(kMsg, "id", "is not an id");
  KEEL_TRY(read_str(body, kMsg, "model_path", &m.model_path, true));
  if (m.model_path.empty()) return bad(kMsg, "model_path", "is empty");
  KEEL_TRY(read_str(body, kMsg, "served_model_name", &m.served_model_name, false));
  KEEL_TRY(read_str(body, kMsg, "role", &m.role, false));
  if (m.role != "colocated" && m.role != "prefill" && m.role != "decode" &&
      m.role != kPpStageRole && m.role != kEpExpertRole) {
    return bad(kMsg, "role", "is not colocated, prefill, decode, pp-stage or ep-expert");
  }
  KEEL_TRY(read_int(body, kMsg, "threads", 1, 1024, &m.threads));
  KEEL_TRY(read_str(body, kMsg, "instance", &m.instance, false));
  KEEL_TRY(read_int(body, kMsg, "priority", -(1 << 30), 1 << 30, &m.priority));
  if (const auto mem = body.find("memory_bytes"); mem != body.end()) {
    if (!mem->is_number_integer() || mem->get<int64_t>() < 0) {
      return bad(kMsg, "memory_bytes", "is not a byte count");
    }
    m.memory_bytes = mem->get<int64_t>();
  }
  KEEL_TRY(read_fence(body, kMsg, &m.election, &m.fence));
  KEEL_TRY(read_str(body, kMsg, "isa", &m.isa, false));
  const auto engine = body.find("engine");
  if (engine != body.end()) {
    Result<TeEngineSpec> e = decode_te_engine_spec(*engine);
    if (!e.ok()) return e.status().with_prefix(std::string(kMsg));
    m.engine = std::move(*e);
  }
  if ((m.role == kEpExpertRole) != (m.engine.ep_member > 0)) {
    return bad(kMsg, "role",
               "ep-expert goes with an engine naming its member shard (engine.ep_member), and only "
               "it");
  }
  return m;
}

Result<StopTe> decode_stop_te(const Json& body) {
  constexpr std::string_view kMsg = "stop_te";
  if (!body.is_object()) return Status::invalid_argument("stop_te: body is not a map");
  StopTe m;
  KEEL_TRY(read_str(body, kMsg, "id", &m.id, true));
  if (m.id.empty()) return bad(kMsg, "id", "is empty");
  KEEL_TRY(read_int(body, kMsg, "grace_ms", 0, 600000, &m.grace_ms));
  KEEL_TRY(read_fence(body, kMsg, &m.election, &m.fence));
  return m;
}

Result<Fence> decode_fence(const Json& body) {
  if (!body.is_object()) return Status::invalid_argument("fence: body is not a map");
  Fence m;
  if (body.find("fence") == body.end()) return bad("fence", "fence", "missing");
  KEEL_TRY(read_fence(body, "fence", &m.election, &m.fence));
  return m;
}

Result<StartTeReply> decode_start_te_reply(const Json& body) {
  constexpr std::string_view kMsg = "start_te reply";
  if (!body.is_object()) return Status::invalid_argument("start_te reply: body is not a map");
  StartTeReply m;
  m.status = decode_status_body(body);
  if (!m.status.ok()) return m;
  KEEL_TRY(read_str(body, kMsg, "id", &m.id, true));
  KEEL_TRY(read_str(body, kMsg, "address", &m.address, true));
  const auto pid = body.find("pid");
  if (pid == body.end() || !pid->is_number_integer()) return bad(kMsg, "pid", "missing");
  m.pid = pid->get<int64_t>();
  const auto warm = body.find("warm");
  if (warm != body.end() && warm->is_boolean()) m.warm = warm->get<bool>();
  return m;
}

}  // namespace keel::cluster
