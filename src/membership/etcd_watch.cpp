// EtcdWatch; see etcd_watch.h.
#include "membership/etcd_watch.h"

#include "core/log.h"
#include "membership/base64.h"

namespace keel::membership {

namespace {

int64_t as_int64(const nlohmann::json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_string()) {
    try {
      return std::stoll(j.get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

std::vector<MemberEvent> parse_watch_line(const std::string& prefix, const std::string& line,
                                          int64_t* last_revision) {
  std::vector<MemberEvent> out;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || !j.contains("result") || !j["result"].is_object()) return out;
  const nlohmann::json& r = j["result"];
  if (!r.contains("events") || !r["events"].is_array()) return out;
  for (const nlohmann::json& e : r["events"]) {
    if (!e.is_object() || !e.contains("kv") || !e["kv"].is_object()) continue;
    const nlohmann::json& kv = e["kv"];
    *last_revision = std::max(*last_revision, as_int64(kv.value("mod_revision", nlohmann::json())));
    const bool deleted = e.value("type", std::string("PUT")) == "DELETE";
    Result<std::string> key = base64_decode(kv.value("key", std::string()));
    if (!key.ok()) continue;
    Result<Member> m = member_from_key(prefix, *key);
    if (!deleted) {
      Result<std::string> value = base64_decode(kv.value("value", std::string()));
      if (!value.ok()) continue;
      m = decode_member(*value);
    }
    if (!m.ok()) continue;
    out.push_back({deleted ? MemberEventType::kRemoved : MemberEventType::kAdded, *m});
  }
  return out;
}

EtcdWatch::EtcdWatch(const EtcdClient& client, std::string prefix, int64_t start_revision)
    : client_(client), prefix_(std::move(prefix)), next_revision_(start_revision) {
  thread_ = std::thread([this] { run(); });
}

EtcdWatch::~EtcdWatch() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cancel_.cancel();
  cv_.notify_all();
  thread_.join();
}

std::optional<MemberEvent> EtcdWatch::next(std::chrono::milliseconds timeout) {
  UniqueLock lock(mu_);
  const bool ready = cv_.wait_for(lock.native(), timeout, [this] {
    mu_.assert_held();  // a wait's predicate runs under its lock
    return !events_.empty();
  });
  if (!ready) return std::nullopt;
  MemberEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void EtcdWatch::run() {
  std::chrono::milliseconds backoff{100};
  size_t endpoint_idx = 0;
  bool failing = false;  // log the first failed reconnect, not every try
  while (true) {
    const EtcdEndpoint& ep = client_.endpoints()[endpoint_idx++ % client_.endpoints().size()];
    const bool received = read_stream(ep);
    if (received) backoff = std::chrono::milliseconds(100);
    UniqueLock lock(mu_);
    if (stopping_) return;
    if (!received && !failing) {
      KEEL_LOG_WARN("membership: watch stream to {}:{} lost; reconnecting with backoff", ep.host,
                    ep.port);
    }
    failing = !received;
    const bool stopped = cv_.wait_for(lock.native(), backoff, [this] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return stopping_;
    });
    if (stopped) return;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

bool EtcdWatch::read_stream(const EtcdEndpoint& ep) {
  const std::string begin = members_prefix(prefix_);
  nlohmann::json body = {
      {"create_request",
       {{"key", base64_encode(begin)}, {"range_end", base64_encode(prefix_range_end(begin))}}}};
  {
    MutexLock lock(mu_);
    if (stopping_) return true;
    body["create_request"]["start_revision"] = std::to_string(next_revision_);
  }
  net::HttpRequest req;
  req.method = "POST";
  req.url.host = ep.host;
  req.url.port = static_cast<uint16_t>(std::stoi(ep.port));  // checked by parse_etcd_endpoint
  req.url.target = "/v3/watch";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = body.dump();
  net::HttpOptions options;
  options.timeout = client_.config().request_timeout;  // the connect and the request
  options.scope = net::TimeoutScope::kUntilSent;       // a watch is silent while nothing changes
  std::string pending;                                 // a partial line
  bool received = false;
  const auto on_head = [](const net::HttpHead&) -> Result<net::AfterHead> {
    return net::AfterHead::kReadBody;
  };
  const auto on_body = [&](std::string_view data) -> Status {
    received = true;
    pending.append(data);
    size_t nl = 0;
    while ((nl = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      MutexLock lock(mu_);
      int64_t last = next_revision_ - 1;
      for (MemberEvent& e : parse_watch_line(prefix_, line, &last)) {
        events_.push_back(std::move(e));
      }
      next_revision_ = last + 1;
      cv_.notify_all();
    }
    return {};
  };
  // The stream's end, a transport error or the cancel: the caller reconnects unless stopping.
  (void)net::http_stream(req, options, on_head, on_body, &cancel_);
  return received;
}

}  // namespace keel::membership
