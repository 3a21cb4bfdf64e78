#include "memsight/cli.h"
#include "memsight/io.h"

int main(int argc, char** argv) {
  memsight::remove_temporaries_on_signals();
  return memsight::cli_main({argv + 1, argv + argc});
}
