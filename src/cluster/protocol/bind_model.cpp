// bind_model codec (see bind_model.h).
#include "cluster/protocol/bind_model.h"

#include <chrono>

namespace keel::cluster {
namespace {

const char* kPhaseNames[] = {"decision_ns", "bound_ns",       "preloaded_ns",
                             "loaded_ns",   "first_token_ns", "announced_ns"};

int64_t* phase_field(ScaleOutPhases& p, int i) {
  int64_t* fields[] = {&p.decision_ns, &p.bound_ns,       &p.preloaded_ns,
                       &p.loaded_ns,   &p.first_token_ns, &p.announced_ns};
  return fields[i];
}

}  // namespace

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

net::Message encode_bind_model(const BindModel& m) {
  Json body = {{"model_path", m.model_path},
               {"store_entry", m.store_entry},
               {"role", m.role},
               {"decision_ns", m.decision_ns},
               {"fork_from", m.fork_from},
               {"use_store", m.use_store},
               {"isa", m.isa}};
  if (m.engine) body["engine"] = encode_te_engine_spec(*m.engine);
  return {std::string(kBindModel), std::move(body)};
}

Result<BindModel> decode_bind_model(const Json& body) {
  try {
    BindModel m;
    m.model_path = body.at("model_path").get<std::string>();
    m.store_entry = body.value("store_entry", std::string());
    m.role = body.value("role", std::string("colocated"));
    m.decision_ns = body.value("decision_ns", int64_t{0});
    m.fork_from = body.value("fork_from", std::string());
    m.use_store = body.value("use_store", true);
    m.isa = body.value("isa", std::string());
    if (const auto engine = body.find("engine"); engine != body.end()) {
      Result<TeEngineSpec> e = decode_te_engine_spec(*engine);
      if (!e.ok()) return e.status().with_prefix("bind_model");
      m.engine = std::move(*e);
    }
    if (!m.fork_from.empty() && m.store_entry.empty()) {
      return Status::invalid_argument("bind_model: fork_from without a store_entry to fork");
    }
    if (m.model_path.empty() && m.store_entry.empty()) {
      return Status::invalid_argument(
          "bind_model: names no model (model_path and store_entry "
          "are both empty)");
    }
    return m;
  } catch (const Json::exception& e) {
    return Status::invalid_argument(std::string("bind_model: ") + e.what());
  }
}

Json encode_bind_reply(const BindReply& r) {
  Json phases = Json::object();
  ScaleOutPhases p = r.phases;
  for (int i = 0; i < 6; ++i) phases[kPhaseNames[i]] = *phase_field(p, i);
  return Json{{"ok", r.status.ok()},
              {"error", r.status.ok() ? std::string() : r.status.to_string()},
              {"port", r.port},
              {"from_store", r.from_store},
              {"store_note", r.store_note},
              {"forked", r.forked},
              {"fork_bytes", r.fork_bytes},
              {"fork_seconds", r.fork_seconds},
              {"fork_error", r.fork_error},
              {"phases", phases}};
}

Result<BindReply> decode_bind_reply(const Json& body) {
  try {
    BindReply r;
    if (!body.at("ok").get<bool>()) {
      r.status = Status::unavailable(body.value("error", std::string("bind failed")));
    }
    r.port = body.at("port").get<int>();
    r.from_store = body.value("from_store", false);
    r.store_note = body.value("store_note", std::string());
    r.forked = body.value("forked", false);
    r.fork_bytes = body.value("fork_bytes", uint64_t{0});
    r.fork_seconds = body.value("fork_seconds", 0.0);
    r.fork_error = body.value("fork_error", std::string());
    const Json& phases = body.at("phases");
    for (int i = 0; i < 6; ++i)
      *phase_field(r.phases, i) = phases.at(kPhaseNames[i]).get<int64_t>();
    return r;
  } catch (const Json::exception& e) {
    return Status::invalid_argument(std::string("bind reply: ") + e.what());
  }
}

Json phase_seconds(const ScaleOutPhases& p) {
  auto s = [](int64_t from, int64_t to) { return static_cast<double>(to - from) * 1e-9; };
  return Json{{"scaler_pre", s(p.decision_ns, p.bound_ns)},
              {"pre_load", s(p.bound_ns, p.preloaded_ns)},
              {"load", s(p.preloaded_ns, p.loaded_ns)},
              {"post_load", s(p.loaded_ns, p.first_token_ns)},
              {"announce", s(p.first_token_ns, p.announced_ns)}};
}

}  // namespace keel::cluster
