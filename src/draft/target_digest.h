// The target digest: which model a draft head belongs to, computed from the weights a loaded
// Model holds, so it is the same whatever layout the bytes are in (a GGUF read or mapped, the
// row-group layout, a model store entry). XXH3-64 over: "keel-draft-target-v1", the architecture
// and shape (n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff), the output norm, every layer's
// attention and FFN norm, and 64 rows of the token embedding and 64 of the LM head (evenly spaced,
// dequantized). Two models of the same shape with other weights differ in those rows.
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <string>

#include "model/model.h"

namespace keel::draft {

[[nodiscard]] uint64_t target_digest(const model::Model& model);
// The digest as 16 lowercase hex digits (the form stored in a draft head file).
[[nodiscard]] std::string digest_hex(uint64_t digest);

}  // namespace keel::draft
