// te_child; see te_launch.h.
#include "cluster/te_launch.h"

namespace keel::cluster {

proc::ChildSpec te_child(const std::vector<std::string>& keel_command, const TeSpec& spec,
                         std::chrono::milliseconds ready_timeout) {
  proc::ChildSpec child;
  child.name = spec.id;
  child.argv = keel_command;
  child.argv.insert(child.argv.end(), {"te", "--spec", "-"});
  child.stdin_bytes = te_spec_text(spec);
  child.ready_timeout = ready_timeout;
  return child;
}

}  // namespace keel::cluster
