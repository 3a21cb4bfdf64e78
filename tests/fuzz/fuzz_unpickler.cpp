// libFuzzer target: the restricted pickle machine alone, with no snapshot
// hook, so every opcode path is reached whatever the value's shape. A
// memsight::Error (bad input) or NeedsFullRead (never thrown
// without a skip key) are the only outcomes besides a value.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "input/source.h"
#include "memsight/error.h"
#include "pickle/unpickler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto src = memsight::memory_source({reinterpret_cast<const char*>(data), size});
    memsight::StringTable strings;
    memsight::Unpickler vm(*src, strings, nullptr);
    memsight::Val v = vm.resolve(vm.run());
    if (v.tag() == memsight::Val::List) (void)vm.list_items(v);
  } catch (const memsight::Error&) {
  }
  return 0;
}
