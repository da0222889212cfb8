// NodeCapacity's parsing and attribute codec; see node_capacity.h.
#include "cluster/policy/node_capacity.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

namespace keel::cluster {
namespace {

Result<int64_t> parse_int(std::string_view what, std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return Status::invalid_argument(std::string(what) + ": not an integer: '" + std::string(text) +
                                    "'");
  }
  return v;
}

// The "tes" attribute: a JSON array of {"id", "instance", "priority", "threads", "memory_bytes",
// "role"} ("role" absent from older agents: colocated).
std::string encode_tes(const std::vector<HostedTe>& tes) {
  nlohmann::json a = nlohmann::json::array();
  for (const HostedTe& t : tes) {
    a.push_back({{"id", t.id},
                 {"instance", t.instance},
                 {"priority", t.priority},
                 {"threads", t.threads},
                 {"memory_bytes", t.memory_bytes},
                 {"role", t.role}});
  }
  return a.dump();
}

Result<std::vector<HostedTe>> decode_tes(const std::string& host_id, const std::string& text) {
  const Status bad = Status::invalid_argument("node " + host_id + ": malformed 'tes' attribute");
  const nlohmann::json a = nlohmann::json::parse(text, nullptr, false);
  if (!a.is_array()) return bad;
  std::vector<HostedTe> out;
  for (const nlohmann::json& e : a) {
    if (!e.is_object()) return bad;
    const auto str = [&](const char* k) { return e.contains(k) && e[k].is_string(); };
    const auto num = [&](const char* k, int64_t hi) {
      return e.contains(k) && e[k].is_number_integer() && e[k].get<int64_t>() >= 0 &&
             e[k].get<int64_t>() <= hi;
    };
    if (!str("id") || !str("instance") || !num("threads", 1 << 20) ||
        !num("memory_bytes", int64_t{1} << 60) || !e.contains("priority") ||
        !e["priority"].is_number_integer() || (e.contains("role") && !str("role"))) {
      return bad;
    }
    const int64_t priority = e["priority"].get<int64_t>();
    if (priority < -(int64_t{1} << 30) || priority > (int64_t{1} << 30)) return bad;
    out.push_back({e["id"].get<std::string>(), e["instance"].get<std::string>(),
                   static_cast<int32_t>(priority), e["threads"].get<int32_t>(),
                   e["memory_bytes"].get<int64_t>(), e.value("role", std::string("colocated"))});
  }
  std::sort(out.begin(), out.end(),
            [](const HostedTe& x, const HostedTe& y) { return x.id < y.id; });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

Result<int64_t> parse_meminfo_field(std::string_view meminfo, std::string_view field) {
  size_t pos = 0;
  while (pos < meminfo.size()) {
    const size_t eol = std::min(meminfo.find('\n', pos), meminfo.size());
    const std::string_view line = meminfo.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || line.substr(0, colon) != field) continue;
    std::string_view value = trim(line.substr(colon + 1));
    int64_t scale = 1;
    if (value.size() >= 2 && value.substr(value.size() - 2) == "kB") {
      scale = 1024;
      value = trim(value.substr(0, value.size() - 2));
    }
    KEEL_ASSIGN_OR_RETURN(int64_t v, parse_int("meminfo " + std::string(field), value));
    if (v < 0 || v > (int64_t{1} << 50)) {
      return Status::invalid_argument("meminfo " + std::string(field) + " out of range");
    }
    return v * scale;
  }
  return Status::not_found("meminfo has no " + std::string(field));
}

std::map<std::string, std::string> capacity_attributes(const NodeCapacity& c) {
  std::string models;
  for (const std::string& m : c.models) models += (models.empty() ? "" : ",") + m;
  return {{"cores", std::to_string(c.cores)},
          {"memory_total_bytes", std::to_string(c.memory_total_bytes)},
          {"memory_available_bytes", std::to_string(c.memory_available_bytes)},
          {"models", models},
          {"max_tes", std::to_string(c.max_tes)},
          {"running_tes", std::to_string(c.running_tes)},
          {"warm_tes", std::to_string(c.warm_tes)},
          {"tes", encode_tes(c.tes)},
          {"stopped", nlohmann::json(c.stopped).dump()}};
}

Result<NodeCapacity> capacity_from_attributes(const std::string& host_id,
                                              const std::string& address,
                                              const std::map<std::string, std::string>& attrs) {
  NodeCapacity c;
  c.host_id = host_id;
  c.address = address;
  const auto number = [&](const char* name) -> Result<int64_t> {
    const auto it = attrs.find(name);
    if (it == attrs.end()) {
      return Status::invalid_argument("node " + host_id + ": no '" + name + "' attribute");
    }
    KEEL_ASSIGN_OR_RETURN(int64_t v, parse_int("node " + host_id + " " + name, it->second));
    if (v < 0) return Status::invalid_argument("node " + host_id + ": negative " + name);
    return v;
  };
  KEEL_ASSIGN_OR_RETURN(int64_t cores, number("cores"));
  if (cores < 1 || cores > 1 << 20) {
    return Status::invalid_argument("node " + host_id + ": cores out of range");
  }
  c.cores = static_cast<int32_t>(cores);
  KEEL_ASSIGN_OR_RETURN(c.memory_total_bytes, number("memory_total_bytes"));
  KEEL_ASSIGN_OR_RETURN(c.memory_available_bytes, number("memory_available_bytes"));
  if (c.memory_available_bytes > c.memory_total_bytes) {
    return Status::invalid_argument("node " + host_id + ": more memory available than in total");
  }
  KEEL_ASSIGN_OR_RETURN(int64_t max_tes, number("max_tes"));
  KEEL_ASSIGN_OR_RETURN(int64_t running, number("running_tes"));
  KEEL_ASSIGN_OR_RETURN(int64_t warm, number("warm_tes"));
  if (max_tes > 1 << 20 || running > 1 << 20 || warm > 1 << 20) {
    return Status::invalid_argument("node " + host_id + ": TE counts out of range");
  }
  c.max_tes = static_cast<int32_t>(max_tes);
  c.running_tes = static_cast<int32_t>(running);
  c.warm_tes = static_cast<int32_t>(warm);
  if (const auto tes = attrs.find("tes"); tes != attrs.end()) {
    KEEL_ASSIGN_OR_RETURN(c.tes, decode_tes(host_id, tes->second));
  }
  if (const auto stopped = attrs.find("stopped"); stopped != attrs.end()) {
    const nlohmann::json ids = nlohmann::json::parse(stopped->second, nullptr, false);
    const bool ok =
        ids.is_array() && ids.size() <= kMaxStoppedIds &&
        std::all_of(ids.begin(), ids.end(), [](const auto& i) { return i.is_string(); });
    if (!ok) return Status::invalid_argument("node " + host_id + ": malformed 'stopped' attribute");
    c.stopped = ids.get<std::vector<std::string>>();
  }
  const auto models = attrs.find("models");
  if (models != attrs.end() && !models->second.empty()) {
    std::string_view rest = models->second;
    while (true) {
      const size_t comma = rest.find(',');
      c.models.emplace_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    std::sort(c.models.begin(), c.models.end());
  }
  return c;
}

}  // namespace keel::cluster
