#pragma once
// The `memsight` command as a function: args exclude the program name.
// Returns the exit status (0 ok, 2 user error, 1 internal error); output
// goes to the process's stdout/stderr.

#include <string>
#include <vector>

namespace memsight {
int cli_main(const std::vector<std::string>& args);
}
