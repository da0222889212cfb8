// TestHttpClient (see test_http_client.h).
#include "test_http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace keel::server::testing {

std::vector<std::string> HttpResult::sse_data() const {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string frame = body.substr(pos, end - pos);
    if (frame.rfind("data: ", 0) == 0) {
      out.push_back(frame.substr(6));
    } else if (const size_t data = frame.find("\ndata: "); data != std::string::npos) {
      out.push_back(frame.substr(data + 7));  // after an "event: <type>" line (Responses API)
    }
    pos = end + 2;
  }
  return out;
}

TestHttpClient::TestHttpClient(uint16_t port, int timeout_ms, const char* source_ip) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (source_ip != nullptr) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source_ip, &from.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
      close();
      return;
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) close();
}

TestHttpClient::~TestHttpClient() { close(); }

void TestHttpClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TestHttpClient::reset() {
  if (fd_ < 0) return;
  linger l{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close();
}

bool TestHttpClient::send_raw(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool TestHttpClient::send(const std::string& method, const std::string& path,
                          const std::string& body, const std::vector<std::string>& headers,
                          bool keep_alive) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const std::string& h : headers) req += h + "\r\n";
  if (!keep_alive) req += "Connection: close\r\n";
  if (!body.empty() || method == "POST") {
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  req += "\r\n" + body;
  return send_raw(req);
}

bool TestHttpClient::fill() {
  if (fd_ < 0) return false;
  char tmp[8192];
  const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

std::optional<std::string> TestHttpClient::read_line() {
  for (;;) {
    const size_t pos = buf_.find("\r\n");
    if (pos != std::string::npos) {
      std::string line = buf_.substr(0, pos);
      buf_.erase(0, pos + 2);
      return line;
    }
    if (!fill()) return std::nullopt;
  }
}

std::optional<std::string> TestHttpClient::read_exact(size_t n) {
  while (buf_.size() < n) {
    if (!fill()) return std::nullopt;
  }
  std::string out = buf_.substr(0, n);
  buf_.erase(0, n);
  return out;
}

std::optional<HttpResult> TestHttpClient::read_head() {
  HttpResult r;
  std::optional<std::string> status = read_line();
  if (!status || status->size() < 12) return std::nullopt;
  r.status = std::stoi(status->substr(9, 3));
  for (;;) {
    std::optional<std::string> line = read_line();
    if (!line) return std::nullopt;
    if (line->empty()) break;
    const size_t colon = line->find(':');
    if (colon == std::string::npos) continue;
    std::string name = line->substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    size_t v = colon + 1;
    while (v < line->size() && (*line)[v] == ' ') ++v;
    r.headers[name] = line->substr(v);
  }
  r.chunked = r.header("transfer-encoding").find("chunked") != std::string::npos;
  return r;
}

std::optional<HttpResult> TestHttpClient::read_response() {
  std::optional<HttpResult> r = read_head();
  if (!r) return std::nullopt;
  if (r->status == 100) return read_response();
  if (r->chunked) {
    for (;;) {
      std::optional<std::string> size_line = read_line();
      if (!size_line) return std::nullopt;
      const size_t size = std::stoul(*size_line, nullptr, 16);
      if (size == 0) {
        if (!read_line()) return std::nullopt;  // trailer end
        break;
      }
      std::optional<std::string> data = read_exact(size);
      if (!data || !read_line()) return std::nullopt;
      r->body += *data;
    }
  } else if (!r->header("content-length").empty()) {
    std::optional<std::string> data = read_exact(std::stoul(r->header("content-length")));
    if (!data) return std::nullopt;
    r->body = std::move(*data);
  } else if (r->status != 204 && r->status != 304) {
    while (fill()) {
    }
    r->body = std::move(buf_);
    buf_.clear();
  }
  return r;
}

bool TestHttpClient::wait_closed(int timeout_ms) {
  if (fd_ < 0) return true;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    char tmp[4096];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

HttpResult http_request(uint16_t port, const std::string& method, const std::string& path,
                        const std::string& body, const std::vector<std::string>& headers) {
  TestHttpClient client(port);
  if (!client.connected() || !client.send(method, path, body, headers, /*keep_alive=*/false)) {
    return HttpResult{};
  }
  return client.read_response().value_or(HttpResult{});
}

}  // namespace keel::server::testing
