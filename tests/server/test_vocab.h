// The server tests' synthetic SPM tokenizer, whose token boundaries the tests control, and a ChatML
// formatter. Free of GoogleTest, so the fuzz targets of tests/fuzz share them.
//
// Thread safety: the tokenizer is immutable; chatml is a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/result.h"
#include "server/chat_formatter.h"
#include "tokenizer/text_span.h"
#include "tokenizer/tokenizer.h"

namespace keel::server::testing {

// Token ids of the synthetic vocabulary (byte tokens <0xXX> are 3 + byte).
inline constexpr int32_t kUnk = 0, kBos = 1, kEos = 2;
inline constexpr int32_t kHello = 259;  // "▁Hello"
inline constexpr int32_t kWorld = 260;  // "▁world"
inline constexpr int32_t kBang = 261;   // "!"
inline constexpr int32_t kThe = 262;    // "▁The"
inline constexpr int32_t kEnd = 263;    // "▁end"
inline constexpr int32_t kSt = 264;     // "ST"
inline constexpr int32_t kOp = 265;     // "OP"
inline constexpr int32_t kMore = 266;   // "▁more"
inline constexpr int32_t kSpace = 267;  // "▁" (so that encoded spaces decode back to spaces)
inline constexpr int32_t kVocabSize = 268;
inline constexpr int32_t byte_token(uint8_t b) { return 3 + b; }

tokenizer::Tokenizer make_test_tokenizer();
// "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then "<|im_start|>assistant\n";
// the contents are the plain spans (the harness's ChatFormatter).
Result<tokenizer::TrackedText> chatml_tracked(std::span<const ChatMessage> messages,
                                              bool add_generation_prompt,
                                              const nlohmann::ordered_json& tools = nullptr,
                                              const nlohmann::ordered_json& kwargs = nullptr);
// chatml_tracked's text.
Result<std::string> chatml(std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace keel::server::testing
