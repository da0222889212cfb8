// ServeProcess and the raw-socket HTTP client used by the end-to-end serving tests.
#include "serve_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace keel::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int connect_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string build_request(const std::string& method, const std::string& target,
                          const std::string& body,
                          const std::map<std::string, std::string>& headers, bool close) {
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  if (!headers.contains("Content-Type")) req += "Content-Type: application/json\r\n";
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (close) req += "Connection: close\r\n";
  return req + "\r\n" + body;
}

// Decodes a chunked body (tolerates a missing final chunk).
std::string dechunk(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t len = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    if (len == 0) break;
    out += raw.substr(eol + 2, len);
    pos = eol + 2 + len + 2;
  }
  return out;
}

HttpResponse parse_response(const std::string& raw) {
  HttpResponse r;
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    r.body = raw;
    return r;
  }
  std::istringstream head(raw.substr(0, head_end));
  std::string line;
  std::getline(head, line);
  if (line.size() > 12) r.status = std::atoi(line.c_str() + 9);
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t v = colon + 1;
    while (v < line.size() && line[v] == ' ') ++v;
    r.headers[name] = line.substr(v);
  }
  const std::string body = raw.substr(head_end + 4);
  auto te = r.headers.find("transfer-encoding");
  r.body = te != r.headers.end() && te->second.find("chunked") != std::string::npos ? dechunk(body)
                                                                                    : body;
  return r;
}

}  // namespace

ServeProcess::ServeProcess(const std::vector<std::string>& args,
                           const std::vector<std::string>& env,
                           const ServeProcessOptions& options) {
  log_path_ = make_temp_dir("serve") + "/stderr.log";
  int pipe_fds[2] = {-1, -1};
  if (options.stderr_pipe && ::pipe(pipe_fds) != 0) {
    error_ = "pipe() failed";
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    if (options.stderr_pipe) {
      ::dup2(pipe_fds[1], 2);
      ::close(pipe_fds[0]);
    } else {
      const int err = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(err, 2);
    }
    if (options.nofile_soft_limit > 0) {
      rlimit lim{};
      ::getrlimit(RLIMIT_NOFILE, &lim);
      lim.rlim_cur = static_cast<rlim_t>(options.nofile_soft_limit);
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<std::string> all = options.wrapper;
    for (const char* a : {KEEL_BINARY, "serve", "--host"}) all.emplace_back(a);
    all.insert(all.end(), {options.host, "--port", "0"});
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  if (options.stderr_pipe) {
    ::close(pipe_fds[1]);
    log_pipe_ = pipe_fds[0];
  }
  const std::string listening = "ready: listening on http://" + options.host + ":";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (log_pipe_ >= 0) {  // copy what the pipe holds into the log file
      pollfd p{log_pipe_, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) {
        char buf[4096];
        const ssize_t n = ::read(log_pipe_, buf, sizeof buf);
        if (n > 0) std::ofstream(log_path_, std::ios::app).write(buf, n);
      }
    }
    const std::string text = slurp(log_path_);
    const size_t at = text.find(listening);
    if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
      port_ = std::atoi(text.c_str() + at + listening.size());
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      error_ = "keel serve exited early: " + text;
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  error_ = "keel serve did not start listening: " + slurp(log_path_);
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0 && terminate_and_wait(15000) < 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  close_log_pipe();
}

void ServeProcess::close_log_pipe() {
  if (log_pipe_ >= 0) ::close(log_pipe_);
  log_pipe_ = -1;
}

int ServeProcess::terminate_and_wait(int timeout_ms) {
  return signal_and_wait(SIGTERM, timeout_ms);
}

int ServeProcess::signal_and_wait(int sig, int timeout_ms) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::string ServeProcess::log() const { return slurp(log_path_); }

HttpResponse http_request(int port, const std::string& method, const std::string& target,
                          const std::string& body,
                          const std::map<std::string, std::string>& headers) {
  HttpResponse r;
  const int fd = connect_local(port);
  if (fd < 0) {
    r.body = "connect failed";
    return r;
  }
  std::string raw;
  if (send_all(fd, build_request(method, target, body, headers, true))) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      raw.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return parse_response(raw);
}

HttpConnection::HttpConnection(int port) : fd_(connect_local(port)) {}

HttpConnection::~HttpConnection() { close(); }

bool HttpConnection::send_post(const std::string& target, const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  return fd_ >= 0 && send_all(fd_, build_request("POST", target, body, headers, false));
}

std::string HttpConnection::read_until(const std::function<bool(const std::string&)>& pred,
                                       int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (fd_ >= 0 && !pred(received_)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    received_.append(buf, static_cast<size_t>(n));
  }
  return received_;
}

void HttpConnection::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data:", pos)) != std::string::npos) {
    size_t start = pos + 5;
    if (start < body.size() && body[start] == ' ') ++start;
    const size_t end = body.find("\n\n", start);
    if (end == std::string::npos) break;
    out.push_back(body.substr(start, end - start));
    pos = end + 2;
  }
  return out;
}

std::string completion_stream_text(const std::string& raw, bool* error) {
  std::string text;
  for (const std::string& data : sse_events(raw)) {
    if (data == "[DONE]") break;
    const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, false);
    if (chunk.is_discarded() || chunk.contains("error")) {
      *error = true;
      continue;
    }
    for (const nlohmann::json& c : chunk.value("choices", nlohmann::json::array())) {
      text += c.value("text", "");
    }
  }
  return text;
}

double metric_value(const std::string& text, const std::string& name, const std::string& label) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    const size_t value_at = line.rfind(' ');
    const std::string labels = line.substr(name.size(), value_at - name.size());
    if (!label.empty() && labels.find(label) == std::string::npos) continue;
    return std::strtod(line.c_str() + value_at + 1, nullptr);
  }
  return -1.0;
}

}  // namespace keel::testing
