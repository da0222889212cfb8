// load_chat_template (see chat_template_choice.h).
#include "tokenizer/chat_template_choice.h"

#include "tokenizer/builtin_chat_templates.h"

namespace keel::tokenizer {
namespace {

std::string builtin_list() {
  std::string out;
  for (std::string_view n : builtin_chat_template_names()) {
    out += (out.empty() ? "" : ", ") + std::string(n);
  }
  return out;
}

Result<std::string> read_template_file(const std::string& flag, const std::string& path,
                                       FileSystem& fs) {
  auto file = fs.open_readable(path);
  if (!file.ok()) return file.error().with_prefix(flag);  // the message names the path
  const uint64_t size = (*file)->size();
  if (size == 0) return Status::invalid_argument(flag + " " + path + ": the file is empty");
  if (size > kMaxChatTemplateFileBytes) {
    return Status::invalid_argument(flag + " " + path + ": " + std::to_string(size) +
                                    " bytes, more than a chat template's limit of " +
                                    std::to_string(kMaxChatTemplateFileBytes));
  }
  std::string text(size, '\0');
  if (Status s = (*file)->read_at(0, size, text.data()); !s.ok()) {
    return s.with_prefix(flag);
  }
  return text;
}

Result<ChosenChatTemplate> parsed(const std::string& where, std::string_view text,
                                  std::string description) {
  auto t = ChatTemplate::parse(text);
  if (!t.ok()) return t.error().with_prefix(where);
  return ChosenChatTemplate{std::move(t).value(), std::move(description)};
}

}  // namespace

Result<std::optional<ChosenChatTemplate>> load_chat_template(const ChatTemplateChoice& choice,
                                                             FileSystem& fs) {
  if (choice.empty()) return std::optional<ChosenChatTemplate>();
  if (!choice.name_or_file.empty() && !choice.file.empty()) {
    return Status::invalid_argument(
        "--chat-template and --chat-template-file both given: use one of them");
  }
  if (!choice.file.empty()) {
    KEEL_ASSIGN_OR_RETURN(std::string text,
                          read_template_file("--chat-template-file", choice.file, fs));
    KEEL_ASSIGN_OR_RETURN(ChosenChatTemplate t, parsed("--chat-template-file " + choice.file, text,
                                                       "file " + choice.file));
    return std::optional<ChosenChatTemplate>(std::move(t));
  }
  const std::string& v = choice.name_or_file;
  if (std::optional<ChatTemplate> t = ChatTemplate::builtin(v)) {
    return std::optional<ChosenChatTemplate>(
        ChosenChatTemplate{std::move(*t), "built-in '" + v + "'"});
  }
  if (v.find("{{") != std::string::npos || v.find("{%") != std::string::npos) {
    KEEL_ASSIGN_OR_RETURN(ChosenChatTemplate t, parsed("--chat-template", v, "inline text"));
    return std::optional<ChosenChatTemplate>(std::move(t));
  }
  if (!fs.exists(v)) {
    return Status::invalid_argument("--chat-template " + v + ": neither a built-in template (" +
                                    builtin_list() + ") nor a file");
  }
  KEEL_ASSIGN_OR_RETURN(std::string text, read_template_file("--chat-template", v, fs));
  KEEL_ASSIGN_OR_RETURN(ChosenChatTemplate t, parsed("--chat-template " + v, text, "file " + v));
  return std::optional<ChosenChatTemplate>(std::move(t));
}

}  // namespace keel::tokenizer
