// ChatTemplateChoice: the chat template a server is told to use at start instead of the GGUF's
// (`--chat-template NAME|FILE|TEXT`, `--chat-template-file FILE`, as llama-server takes them),
// resolved once, before anything serves: a template that cannot be read or does not parse is an
// error for the command line, never a silent fall back to the GGUF's template or to ChatML.
// --chat-template: a built-in name (builtin_chat_templates.h) first; else Jinja text itself when
// it holds "{{" or "{%" (llama-server's inline form); else the path of a file.
// --chat-template-file: always a path. Giving both is an error.
//
// Thread safety: load_chat_template is reentrant (the FileSystem is the caller's).
#pragma once

#include <optional>
#include <string>

#include "core/file_system.h"
#include "core/result.h"
#include "tokenizer/chat_template.h"

namespace keel::tokenizer {

struct ChatTemplateChoice {
  std::string name_or_file;  // --chat-template ("" = not given)
  std::string file;          // --chat-template-file ("" = not given)
  [[nodiscard]] bool empty() const { return name_or_file.empty() && file.empty(); }
};

struct ChosenChatTemplate {
  ChatTemplate tmpl;
  std::string description;  // for the log: "built-in 'qwen3'", "file PATH", "inline text"
};

// Template files larger than this are refused (real templates are a few KiB).
inline constexpr uint64_t kMaxChatTemplateFileBytes = uint64_t{1} << 20;

// nullopt when `choice` is empty (the GGUF's template stays). Errors: InvalidArgument naming the
// flag and its value — both flags given, an unknown name that is no file, an empty or too large
// file, a template that does not parse (with line and column); the file system's error for a
// file that cannot be read.
Result<std::optional<ChosenChatTemplate>> load_chat_template(const ChatTemplateChoice& choice,
                                                             FileSystem& fs);

}  // namespace keel::tokenizer
