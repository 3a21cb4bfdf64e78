#include "memsight/cli.h"

int main(int argc, char** argv) { return memsight::cli_main({argv + 1, argv + argc}); }
