#pragma once
// User-facing errors: one line that says what went wrong and where. The CLI
// prints what() and exits with status 2.

#include <stdexcept>
#include <string>

namespace memsight {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace memsight
