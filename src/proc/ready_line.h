// The ready protocol between a supervised child (`keel te`, `keel je`, the gateway) and the
// process supervisor that started it: when the child is serving it prints exactly one line
//   KEEL_READY {"role":"te","port":41234,"pid":123}
// on its stdout. The payload is one JSON object on one line; its fields are the child's business
// (by convention "role", "port" — the loopback port it bound — and "pid").
//
// Thread safety: free functions; print_ready_line writes to fd 1 and may be called from any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/status.h"

namespace keel::proc {

// The line prefix, including the separating space.
inline constexpr std::string_view kReadyPrefix = "KEEL_READY ";

// True when `line` (without its newline) claims to be a ready line, i.e. starts with kReadyPrefix
// or is exactly "KEEL_READY". A claiming line that fails to parse is an error, not output.
[[nodiscard]] bool is_ready_line(std::string_view line);

// "KEEL_READY <payload dumped on one line>" without a newline. `payload` must be an object.
[[nodiscard]] std::string format_ready_line(const nlohmann::json& payload);

// Parses a ready line (a trailing "\n" or "\r\n" is allowed). Total: anything that is not the
// prefix followed by one JSON object is InvalidArgument, with the reason.
[[nodiscard]] Result<nlohmann::json> parse_ready_line(std::string_view line);

// The "port" field of a ready payload: an integer in [1, 65535], or InvalidArgument.
[[nodiscard]] Result<int> ready_port(const nlohmann::json& payload);

// For children: flushes stdio's stdout, then writes the ready line and its newline to fd 1 in one
// write (retrying short writes), so the supervisor sees it now and whole. IoError on failure.
Status print_ready_line(const nlohmann::json& payload);

}  // namespace keel::proc
