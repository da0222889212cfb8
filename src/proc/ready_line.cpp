// The KEEL_READY line (ready_line.h): formatting for children, a total parser for the supervisor.
#include "proc/ready_line.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace keel::proc {

namespace {
constexpr std::string_view kReadyWord = "KEEL_READY";
}  // namespace

bool is_ready_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  return line == kReadyWord || line.starts_with(kReadyPrefix);
}

std::string format_ready_line(const nlohmann::json& payload) {
  KEEL_CHECK_MSG(payload.is_object(), "a ready payload must be a JSON object");
  return std::string(kReadyPrefix) + payload.dump();
}

Result<nlohmann::json> parse_ready_line(std::string_view line) {
  if (line.ends_with('\n')) line.remove_suffix(1);
  if (line.ends_with('\r')) line.remove_suffix(1);
  if (!line.starts_with(kReadyPrefix)) {
    return Status::invalid_argument("not a ready line (expected 'KEEL_READY {...}')");
  }
  const std::string_view body = line.substr(kReadyPrefix.size());
  if (body.find('\n') != std::string_view::npos) {
    return Status::invalid_argument("ready line spans several lines");
  }
  nlohmann::json payload = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (payload.is_discarded()) return Status::invalid_argument("ready line payload is not JSON");
  if (!payload.is_object()) {
    return Status::invalid_argument("ready line payload is not a JSON object");
  }
  return payload;
}

Result<int> ready_port(const nlohmann::json& payload) {
  const auto it = payload.find("port");
  if (it == payload.end()) return Status::invalid_argument("ready payload has no \"port\"");
  if (!it->is_number_integer()) {
    return Status::invalid_argument("ready payload \"port\" is not an integer");
  }
  const int64_t port = it->get<int64_t>();
  if (port < 1 || port > 65535) {
    return Status::invalid_argument("ready payload \"port\" is out of range");
  }
  return static_cast<int>(port);
}

Status print_ready_line(const nlohmann::json& payload) {
  if (!payload.is_object()) return Status::invalid_argument("a ready payload must be an object");
  const std::string line = format_ready_line(payload) + "\n";
  std::fflush(stdout);  // earlier stdio output goes first
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, line.data() + written, line.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::io_error(std::string("writing the ready line: ") + std::strerror(errno));
    }
    written += static_cast<size_t>(n);
  }
  return Status::ok_status();
}

}  // namespace keel::proc
