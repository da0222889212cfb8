// te_child / je_child; see executor_launch.h.
#include "cluster/protocol/executor_launch.h"

namespace keel::cluster {
namespace {

proc::ChildSpec child(const std::vector<std::string>& keel_command, const char* command,
                      const std::string& id, std::string spec_text,
                      std::chrono::milliseconds ready_timeout) {
  proc::ChildSpec c;
  c.name = id;
  c.argv = keel_command;
  c.argv.insert(c.argv.end(), {command, "--id", id, "--spec", "-"});
  c.stdin_bytes = std::move(spec_text);
  c.ready_timeout = ready_timeout;
  return c;
}

}  // namespace

proc::ChildSpec te_child(const std::vector<std::string>& keel_command, const TeSpec& spec,
                         std::chrono::milliseconds ready_timeout) {
  return child(keel_command, "te", spec.id, te_spec_text(spec), ready_timeout);
}

proc::ChildSpec je_child(const std::vector<std::string>& keel_command, const JeSpec& spec,
                         std::chrono::milliseconds ready_timeout) {
  return child(keel_command, "je", spec.id, je_spec_text(spec), ready_timeout);
}

}  // namespace keel::cluster
