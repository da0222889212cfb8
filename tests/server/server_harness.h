// Shared fixtures of the server tests: a small synthetic SPM tokenizer whose token boundaries the
// tests control, a ChatML formatter, and ServerHarness — a real Server on 127.0.0.1 (ephemeral
// port) in front of a FakeEngine.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "fake_engine.h"
#include "server/server.h"
#include "test_http_client.h"
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
                                              bool add_generation_prompt);
// chatml_tracked's text.
Result<std::string> chatml(std::span<const ChatMessage> messages, bool add_generation_prompt);

ServerConfig test_config();

class ServerHarness {
 public:
  explicit ServerHarness(ServerConfig config = test_config(), int64_t max_model_len = 256,
                         const tokenizer::Tokenizer* tokenizer = nullptr);
  ~ServerHarness();

  [[nodiscard]] uint16_t port() const { return server_->port(); }
  FakeEngine& engine() { return *engine_; }
  Server& server() { return *server_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  std::atomic<bool>& ready() { return ready_; }

 private:
  std::unique_ptr<FakeEngine> engine_;
  tokenizer::Tokenizer own_tokenizer_;
  const tokenizer::Tokenizer* tokenizer_;
  std::atomic<bool> ready_{true};
  std::unique_ptr<Server> server_;
};

}  // namespace keel::server::testing
