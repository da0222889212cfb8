// EtcdWatch; see etcd_watch.h.
#include "membership/etcd_watch.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/log.h"
#include "membership/base64.h"

namespace keel::membership {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using net::ip::tcp;

// One connection's I/O objects; stop() posts a close onto its io_context from any thread.
struct EtcdWatch::Stream {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  void stop() { ioc.stop(); }  // thread-safe; run() returns, pending operations are dropped
};

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
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (stream_) stream_->stop();
  }
  cv_.notify_all();
  thread_.join();
}

std::optional<MemberEvent> EtcdWatch::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
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
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return;
    if (!received && !failing) {
      KEEL_LOG_WARN("membership: watch stream to {}:{} lost; reconnecting with backoff", ep.host,
                    ep.port);
    }
    failing = !received;
    if (cv_.wait_for(lock, backoff, [this] { return stopping_; })) return;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
  }
}

bool EtcdWatch::read_stream(const EtcdEndpoint& ep) {
  const std::string begin = members_prefix(prefix_);
  nlohmann::json body = {
      {"create_request",
       {{"key", base64_encode(begin)}, {"range_end", base64_encode(prefix_range_end(begin))}}}};
  int64_t start = 0;
  http::request<http::string_body> req{http::verb::post, "/v3/watch", 11};
  req.set(http::field::host, ep.host + ":" + ep.port);
  req.set(http::field::content_type, "application/json");
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  std::string pending;  // a partial line
  bool received = false;
  auto on_chunk = [&](uint64_t, beast::string_view data, error_code&) -> size_t {
    received = true;
    pending.append(data.data(), data.size());
    size_t nl = 0;
    while ((nl = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      std::lock_guard<std::mutex> lock(mu_);
      int64_t last = next_revision_ - 1;
      for (MemberEvent& e : parse_watch_line(prefix_, line, &last)) {
        events_.push_back(std::move(e));
      }
      next_revision_ = last + 1;
      cv_.notify_all();
    }
    return data.size();
  };
  parser.on_chunk_body(on_chunk);
  // Declared after what its handlers borrow, so its pending operations die first.
  auto s = std::make_shared<Stream>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return true;
    stream_ = s;
    start = next_revision_;
  }
  body["create_request"]["start_revision"] = std::to_string(start);
  req.body() = body.dump();
  req.prepare_payload();
  tcp::resolver resolver(s->ioc);
  error_code ec;
  const auto results = resolver.resolve(ep.host, ep.port, ec);
  if (ec) return false;
  s->stream.expires_after(client_.config().request_timeout);  // the connect and the request
  s->stream.async_connect(results, [&](error_code e, const tcp::endpoint&) {
    if (e) return;
    http::async_write(s->stream, req, [&](error_code e2, size_t) {
      if (e2) return;
      s->stream.expires_never();  // a watch is silent while nothing changes
      http::async_read(s->stream, buffer, parser, [](error_code, size_t) {});
    });
  });
  s->ioc.run();
  std::lock_guard<std::mutex> lock(mu_);
  stream_.reset();
  return received;
}

}  // namespace keel::membership
