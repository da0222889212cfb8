// Base64 (RFC 4648, standard alphabet, padded): how etcd's JSON gateway carries keys and values.
// Pure functions; decode rejects any other character or a bad length with InvalidArgument.
#pragma once

#include <string>

#include "core/result.h"

namespace keel::membership {

std::string base64_encode(const std::string& bytes);
Result<std::string> base64_decode(const std::string& text);

}  // namespace keel::membership
