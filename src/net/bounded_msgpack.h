// A MessagePack document read with a bound on its nesting, refused before the deeper level is
// built (nlohmann's binary reader recurses once per level, so hostile input cannot exhaust the
// stack). What every envelope keel reads off a socket goes through: a cluster link's frames
// (link.h) and the engine's wire codec (engine/wire.h).
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <span>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace keel::net {

// The document when it is MessagePack nested at most `max_depth` levels; otherwise
// InvalidArgument "not MessagePack: <why>" or "nesting deeper than N levels".
[[nodiscard]] Result<nlohmann::json> parse_bounded_msgpack(std::span<const uint8_t> bytes,
                                                           int max_depth);

}  // namespace keel::net
