// The draft model of draft-model speculation (docs/speculative.md; llama.cpp's `-md`, vLLM's
// draft models): any smaller model of keel's architectures whose vocabulary is the target's, so
// that its token ids are the target's. This file opens one and refuses a draft whose vocabulary
// differs; draft/draft_model_runner.h drafts with it.
// "The same vocabulary" is checked on the GGUF metadata: the same number of token rows
// (token_embd), and when the target's file has a tokenizer (tokenizer.ggml.*) the same tokenizer
// model, the same token texts id by id, and the same BOS and EOS ids. (llama.cpp tolerates a
// slightly larger draft vocabulary; keel does not: a draft id must be a target id.)
// Thread safety: pure functions.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "core/status.h"
#include "model/model.h"

namespace keel::draft {

// OK when `draft` can draft for `target`; otherwise InvalidArgument naming `draft_name` and the
// first difference ("draft model D: its vocabulary differs from the target's: token 7 is 'x',
// not 'y'").
[[nodiscard]] Status check_same_vocabulary(const model::Model& target, const model::Model& draft,
                                           const std::string& draft_name);

// Loads the model at `path` (its own context length, its tensor bytes read) and checks it against
// `target`. NotFound / IoError / the loader's errors pass through; a vocabulary that differs is
// InvalidArgument as above.
[[nodiscard]] Result<std::unique_ptr<model::Model>> open_draft_model(const std::string& path,
                                                                     const model::Model& target);

}  // namespace keel::draft
