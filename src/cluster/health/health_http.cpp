// HealthHttp (see health_http.h): an asio io_context on one thread, an async accept loop, and one
// short exchange per connection.
#include "cluster/health/health_http.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

namespace keel::cluster {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HealthHttp::State {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::string path;
  Handler handler;
  std::thread thread;
  uint16_t port = 0;
  bool stopped = false;
};

namespace {

constexpr auto kReadTimeout = std::chrono::seconds(2);
constexpr size_t kMaxRequestBytes = 8 << 10;

std::string error_body(const std::string& message, const std::string& type) {
  return nlohmann::json{{"error", {{"message", message}, {"type", type}, {"code", nullptr}}}}
      .dump();
}

// One connection: read one request, answer it, close.
struct Exchange : std::enable_shared_from_this<Exchange> {
  Exchange(tcp::socket socket, HealthHttp::State* state)
      : stream(std::move(socket)), state(state) {}

  void run() {
    parser.body_limit(kMaxRequestBytes);
    parser.header_limit(kMaxRequestBytes);
    stream.expires_after(kReadTimeout);
    http::async_read(stream, buffer, parser,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (!ec) self->answer();
                     });
  }

  void answer() {
    const auto& req = parser.get();
    response.version(11);
    response.keep_alive(false);
    response.set(http::field::content_type, "application/json");
    if (req.method() != http::verb::get) {
      response.result(http::status::method_not_allowed);
      response.body() = error_body("only GET is served here", "invalid_request_error");
    } else if (req.target() != state->path) {
      response.result(http::status::not_found);
      response.body() =
          error_body("no such path; GET " + state->path + " is served here", "not_found_error");
    } else {
      const HealthReply r = state->handler();
      response.result(static_cast<http::status>(r.status));
      response.body() = r.body;
    }
    response.prepare_payload();
    stream.expires_after(kReadTimeout);
    http::async_write(stream, response, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

  beast::tcp_stream stream;
  HealthHttp::State* state;
  beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  http::response<http::string_body> response;
};

void accept_next(HealthHttp::State* state) {
  state->acceptor.async_accept([state](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !state->acceptor.is_open()) return;
    if (!ec) std::make_shared<Exchange>(std::move(socket), state)->run();
    accept_next(state);
  });
}

}  // namespace

Result<std::unique_ptr<HealthHttp>> HealthHttp::start(const std::string& host, uint16_t port,
                                                      std::string path, Handler handler) {
  beast::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(host, ec);
  if (ec) return Status::invalid_argument("health endpoint: bad host '" + host + "'");
  auto state = std::make_shared<State>();
  state->path = std::move(path);
  state->handler = std::move(handler);
  const tcp::endpoint at(addr, port);
  state->acceptor.open(at.protocol(), ec);
  if (!ec) state->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(at, ec);
  if (!ec) state->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) state->port = state->acceptor.local_endpoint(ec).port();
  if (ec) {
    return Status::unavailable("health endpoint: cannot listen on " + host + ":" +
                               std::to_string(port) + ": " + ec.message());
  }
  accept_next(state.get());
  state->thread = std::thread([s = state.get()] { s->io.run(); });
  return std::unique_ptr<HealthHttp>(new HealthHttp(std::move(state)));
}

uint16_t HealthHttp::port() const { return state_->port; }

void HealthHttp::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  asio::post(state_->io, [s = state_.get()] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
  });
  state_->io.stop();  // open exchanges are dropped with the context
  if (state_->thread.joinable()) state_->thread.join();
}

HealthHttp::~HealthHttp() { stop(); }

}  // namespace keel::cluster
