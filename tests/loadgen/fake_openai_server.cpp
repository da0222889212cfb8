// FakeOpenAiServer: accept loop and one coroutine per connection (keep-alive loop of requests),
// all on one io_context thread. Streams are written as HTTP chunks with timers for the delays.
#include "fake_openai_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>

namespace keel::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using net::awaitable;
using net::use_awaitable;
using net::ip::tcp;
using nlohmann::json;

std::string str(beast::string_view v) { return std::string(v.data(), v.size()); }

struct FakeOpenAiServer::Impl {
  FakeServerOptions options;
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  uint16_t port = 0;  // set before the thread starts
  std::atomic<int64_t> posts{0};
  std::atomic<int64_t> connections{0};
  mutable std::mutex mu;
  std::vector<std::string> bodies;       // guarded by mu
  std::vector<std::string> request_ids;  // guarded by mu

  static awaitable<void> sleep_ms(int ms) {
    if (ms <= 0) co_return;
    net::steady_timer t(co_await net::this_coro::executor);
    t.expires_after(std::chrono::milliseconds(ms));
    co_await t.async_wait(use_awaitable);
  }

  // Writes one SSE event as one or two HTTP chunks.
  awaitable<void> send_event(tcp::socket& s, const std::string& event) {
    if (options.split_events && event.size() > 4) {
      const size_t half = event.size() / 2;
      co_await net::async_write(s, http::make_chunk(net::buffer(event.data(), half)),
                                use_awaitable);
      co_await sleep_ms(1);
      co_await net::async_write(
          s, http::make_chunk(net::buffer(event.data() + half, event.size() - half)),
          use_awaitable);
    } else {
      co_await net::async_write(s, http::make_chunk(net::buffer(event)), use_awaitable);
    }
  }

  static int64_t prompt_tokens_of(const json& req) {
    if (req.contains("prompt") && req["prompt"].is_array()) return req["prompt"].size();
    std::string text;
    if (req.contains("prompt") && req["prompt"].is_string()) text = req["prompt"];
    if (req.contains("messages")) text = req["messages"][0]["content"];
    int64_t words = text.empty() ? 0 : 1;
    for (char c : text) words += c == ' ';
    return words;
  }

  static std::string content_chunk(bool chat, int i, bool last) {
    json choice = {{"index", 0}, {"finish_reason", last ? json("length") : json(nullptr)}};
    if (chat) {
      choice["delta"] = i == 0 ? json{{"role", "assistant"}, {"content", "t0"}}
                               : json{{"content", " t" + std::to_string(i)}};
    } else {
      choice["text"] = " t" + std::to_string(i);
    }
    json c = {{"id", "x-1"},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", 0},
              {"model", "fake"},
              {"choices", json::array({choice})},
              {"usage", nullptr}};
    return "data: " + c.dump() + "\n\n";
  }

  // Streams the SSE body of one POST; returns false when the connection must close.
  awaitable<bool> stream(tcp::socket& s, const json& req, bool chat, bool keep_alive, FakeFault f) {
    http::response<http::empty_body> res{http::status::ok, 11};
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
    res.chunked(true);
    res.keep_alive(keep_alive);
    http::response_serializer<http::empty_body> sr{res};
    co_await http::async_write_header(s, sr, use_awaitable);
    if (options.ping) co_await send_event(s, ": ping\n\n");
    co_await sleep_ms(options.first_delay_ms);
    const int k = options.num_chunks;
    for (int i = 0; i < k; ++i) {
      if (i > 0) co_await sleep_ms(options.chunk_delay_ms);
      co_await send_event(s, content_chunk(chat, i, i == k - 1));
      if (f == FakeFault::kCloseMidStream && i == 1) co_return false;
      if (f == FakeFault::kErrorPayload && i == 0) {
        co_await send_event(
            s,
            R"(data: {"error":{"message":"injected mid-stream failure","type":"server_error","param":null,"code":500}})"
            "\n\n");
        break;
      }
      if (f == FakeFault::kMalformed && i == 0) {
        co_await send_event(s, "data: {this is not json\n\n");
        break;
      }
    }
    if (options.send_usage && f == FakeFault::kNone) {
      json u = {{"id", "x-1"},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"choices", json::array()},
                {"usage",
                 {{"prompt_tokens", prompt_tokens_of(req)},
                  {"completion_tokens", k},
                  {"total_tokens", prompt_tokens_of(req) + k}}}};
      co_await send_event(s, "data: " + u.dump() + "\n\n");
    }
    if (f != FakeFault::kNoDone) co_await send_event(s, "data: [DONE]\n\n");
    co_await net::async_write(s, http::make_chunk_last(), use_awaitable);
    co_return keep_alive;
  }

  awaitable<bool> respond_json(tcp::socket& s, http::status status, const std::string& body,
                               bool keep_alive) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::content_type, "application/json");
    res.keep_alive(keep_alive);
    res.body() = body;
    res.prepare_payload();
    co_await http::async_write(s, res, use_awaitable);
    co_return keep_alive;
  }

  awaitable<bool> handle(tcp::socket& s, const http::request<http::string_body>& req) {
    const bool keep = req.keep_alive();
    if (req.method() == http::verb::get && req.target() == "/v1/models") {
      json list = {{"object", "list"},
                   {"data", json::array({{{"id", options.model_id}, {"object", "model"}}})}};
      co_return co_await respond_json(s, http::status::ok, list.dump(), keep);
    }
    if (req.method() == http::verb::get && req.target() == "/metrics") {
      http::response<http::string_body> res{http::status::ok, 11};
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      res.keep_alive(keep);
      res.body() =
          "# HELP keel:kv_cache_usage_perc Fraction of KV-cache blocks in use (0..1).\n"
          "# TYPE keel:kv_cache_usage_perc gauge\n"
          "keel:kv_cache_usage_perc{model_name=\"" +
          options.model_id + "\"} 0.42\n";
      res.prepare_payload();
      co_await http::async_write(s, res, use_awaitable);
      co_return keep;
    }
    if (req.method() != http::verb::post) {
      co_return co_await respond_json(s, http::status::not_found, R"({"error":"no route"})", keep);
    }
    const int64_t n = ++posts;
    {
      std::lock_guard<std::mutex> lock(mu);
      bodies.push_back(req.body());
      request_ids.push_back(str(req["x-request-id"]));
    }
    if (!options.required_api_key.empty() &&
        str(req[http::field::authorization]) != "Bearer " + options.required_api_key) {
      co_return co_await respond_json(
          s, http::status::unauthorized,
          R"({"error":{"message":"bad api key","type":"authentication_error","code":401}})", keep);
    }
    const FakeFault f =
        options.fault_every > 0 && n % options.fault_every == 0 ? options.fault : FakeFault::kNone;
    if (f == FakeFault::kHttp500) {
      co_return co_await respond_json(
          s, http::status::internal_server_error,
          R"({"error":{"message":"injected failure","type":"server_error","param":null,"code":500}})",
          keep);
    }
    const json body = json::parse(req.body(), nullptr, false);
    const bool chat = str(req.target()).ends_with("chat/completions");
    co_return co_await stream(s, body, chat, keep, f);
  }

  awaitable<void> session(tcp::socket s) {
    try {
      s.set_option(tcp::no_delay(true));
      beast::flat_buffer buf;
      for (;;) {
        http::request<http::string_body> req;
        co_await http::async_read(s, buf, req, use_awaitable);
        if (!co_await handle(s, req)) break;
      }
    } catch (const std::exception&) {
      // client went away or a fault closed the connection
    }
    boost::system::error_code ec;
    s.shutdown(tcp::socket::shutdown_both, ec);
    s.close(ec);
  }

  awaitable<void> accept_loop() {
    for (;;) {
      boost::system::error_code ec;
      tcp::socket s = co_await acceptor.async_accept(net::redirect_error(use_awaitable, ec));
      if (ec) co_return;
      ++connections;
      net::co_spawn(io, session(std::move(s)), net::detached);
    }
  }
};

FakeOpenAiServer::FakeOpenAiServer(FakeServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(net::socket_base::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  net::co_spawn(impl_->io, impl_->accept_loop(), net::detached);
  thread_ = std::thread([this] { impl_->io.run(); });
}

FakeOpenAiServer::~FakeOpenAiServer() {
  impl_->io.stop();
  thread_.join();
}

uint16_t FakeOpenAiServer::port() const { return impl_->port; }

std::string FakeOpenAiServer::base_url() const {
  return "http://127.0.0.1:" + std::to_string(port());
}

int64_t FakeOpenAiServer::posts_seen() const { return impl_->posts.load(); }

int64_t FakeOpenAiServer::connections_accepted() const { return impl_->connections.load(); }

std::vector<std::string> FakeOpenAiServer::bodies() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->bodies;
}

std::vector<std::string> FakeOpenAiServer::request_ids() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->request_ids;
}

}  // namespace keel::testing
